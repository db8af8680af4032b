"""``GET /status``: what the agent sees and does, in one versioned JSON document (``koordlet/v1``).

``koordlet top`` and ``koordlet demo`` read it; scripts may too (``docs/status-api.md`` is the contract:
fields are only ever added within ``koordlet/v1``). It is built on request from the agent's own state,
never from ``/metrics`` text: usage from the metric cache averaged over ``?window=`` seconds (default 5),
pods with QoS and priority from the states informer, the BE tier's cpuset and CFS quota as the kernel
holds them now, the BE budget as ``BECPUSuppress`` last computed it (``plugins[].status``), recent
evictions from the executor's audit log and every plugin's state.

Layer: beside the daemon; it sees the components only through ``koordlet.api`` views and two callables.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psutil

from koordlet import api
from koordshared import __version__
from koordshared.runtime.httpserver import Response, Route, json_response

API_VERSION = "koordlet/v1"
KIND = "AgentStatus"
DEFAULT_WINDOW = 5.0
MAX_WINDOW = 600.0
EVICTIONS_SHOWN = 20
EVICTION_RESOURCE = "pod/eviction"
"""The audit log's resource name for an eviction (:mod:`koordlet.qosmanager.evictor`)."""
CFS_PERIOD_US_DEFAULT = 100_000


@dataclass(frozen=True)
class StatusSources:
    """What the document is built from; the daemon wires the real components in."""

    node_name: str
    states: api.StatesReader
    metrics: api.MetricReader
    host: api.HostReader
    audit: Callable[[], Sequence[dict[str, Any]]]
    """Audit events, oldest first, as ``/events`` serves them."""
    plugins: Callable[[], Sequence[dict[str, api.JSONValue]]]
    """``QOSManager.report()``: name, source, state and status of every plugin."""
    wall_clock: Callable[[], float]
    started_at: float
    """Wall-clock start of the agent."""


def _avg(
    src: StatusSources, metric: str, window: float, labels: dict[str, str] | None = None
) -> float | None:
    got = src.metrics.query(metric, window=window, agg="avg", labels=labels)
    if got is None or got.count <= 0 or not math.isfinite(got.value):
        return None
    return got.value


def _read(host: api.HostReader, resource_name: str, cgroup_dir: str) -> str | None:
    try:
        value = host.read(resource_name, cgroup_dir)
    except api.KoordletError:
        return None
    return value.strip() if value is not None else None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _node(src: StatusSources, window: float) -> dict[str, Any]:
    node = src.states.node()
    cpus = len(src.host.cpu_topology())
    capacity = node.cpu_capacity_milli / 1000 if node is not None and node.cpu_capacity_milli > 0 else cpus
    return {
        "name": src.node_name,
        "cpu": {"capacityCores": capacity, "usedCores": _avg(src, api.NODE_CPU_USAGE, window)},
        "memory": {
            "capacityBytes": node.memory_capacity_bytes if node is not None else None,
            "usedBytes": _avg(src, api.NODE_MEMORY_USAGE, window),
        },
        "systemCPUCores": _avg(src, api.SYS_CPU_USAGE, window),
    }


def _be_tier(src: StatusSources, window: float) -> dict[str, Any]:
    """The BE tier as the kernel holds it now: what BE may use (cpuset, quota) and what it uses."""
    be_dir = src.host.qos_cgroup_dir(api.KubeQOSClass.BESTEFFORT)
    cpuset = _read(src.host, "cpuset.cpus", be_dir)
    quota = _int(_read(src.host, "cpu.cfs_quota_us", be_dir))
    period = _int(_read(src.host, "cpu.cfs_period_us", be_dir)) or CFS_PERIOD_US_DEFAULT
    cpus: int | None = None
    if cpuset:
        try:
            cpus = len(api.parse_cpuset(cpuset))
        except ValueError:
            cpus = None
    allowed = [float(c) for c in (cpus,) if c is not None]
    if quota is not None and quota > 0:
        allowed.append(quota / period)
    used_milli = _avg(src, api.NODE_BE, window, {"be_resource": "cpu", "be_allocation": "usage"})
    return {
        "cgroup": be_dir,
        "cpuset": cpuset,
        "cpusetCPUs": cpus,
        "cfsQuotaUs": quota,
        "cfsPeriodUs": period,
        "allowedCores": min(allowed) if allowed else None,
        "usedCores": used_milli / 1000 if used_milli is not None else None,
    }


def _pods(src: StatusSources, window: float) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for pod in src.states.pods():
        labels = {"pod_uid": pod.uid}
        rows.append(
            {
                "namespace": pod.namespace,
                "name": pod.name,
                "uid": pod.uid,
                "qos": str(pod.qos) or None,
                "kubeQOS": str(pod.kube_qos),
                "priorityClass": str(pod.priority_class) or None,
                "priority": pod.priority,
                "phase": pod.phase,
                "cpuCores": _avg(src, api.POD_CPU_USAGE, window, labels),
                "memoryBytes": _avg(src, api.POD_MEMORY_USAGE, window, labels),
                "cpuRequestMilli": pod.cpu_request_milli,
            }
        )
    rows.sort(key=lambda r: (-(r["cpuCores"] or 0.0), r["namespace"], r["name"]))
    return rows


def _evictions(src: StatusSources) -> list[dict[str, Any]]:
    picked = [e for e in src.audit() if e.get("resource") == EVICTION_RESOURCE][-EVICTIONS_SHOWN:]
    return [
        {
            "time": e.get("time"),
            "pod": e.get("path"),
            "uid": e.get("before"),
            "by": e.get("owner"),
            "message": e.get("reason"),
            "outcome": e.get("after"),
        }
        for e in reversed(picked)
    ]


def _self() -> dict[str, Any]:
    """The agent's own cost: CPU seconds so far (a reader takes the rate between two documents), RSS."""
    me = psutil.Process()
    with me.oneshot():
        cpu = me.cpu_times()
        rss = me.memory_info().rss
    return {"version": __version__, "cpuSeconds": cpu.user + cpu.system, "rssBytes": rss}


def build_status(src: StatusSources, window: float = DEFAULT_WINDOW) -> dict[str, Any]:
    """The ``koordlet/v1`` ``AgentStatus`` document (``docs/status-api.md``)."""
    now = src.wall_clock()
    plugins = list(src.plugins())
    suppress = next((p.get("status") for p in plugins if p.get("name") == "BECPUSuppress"), None)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "time": now,
        "windowSeconds": window,
        "agent": {**_self(), "startedAt": src.started_at, "synced": src.states.has_synced()},
        "node": _node(src, window),
        "beCPU": {**_be_tier(src, window), "suppress": suppress or None},
        "pods": _pods(src, window),
        "evictions": _evictions(src),
        "plugins": plugins,
    }


def status_route(src: StatusSources) -> Route:
    """``GET /status[?window=<seconds>]`` (window 0.1..600, default 5)."""

    def route(query: dict[str, list[str]]) -> Response:
        raw = query.get("window", [str(DEFAULT_WINDOW)])[0]
        try:
            window = float(raw)
        except ValueError:
            window = math.nan
        if not 0.1 <= window <= MAX_WINDOW:
            return json_response({"error": f"window={raw!r}: seconds between 0.1 and {MAX_WINDOW:g}"}, 400)
        return json_response(build_status(src, window))

    return route
