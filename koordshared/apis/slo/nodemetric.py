"""NodeMetric (``slo.koordinator.sh/v1alpha1``): the collect policy of the spec, a typed status view, and
the object kept with its status parsed (:class:`ParsedNodeMetric`, what koord-scheduler's caches hold).

The agent builds the status as a :class:`NodeMetricStatus` and writes it with :func:`to_status` in
Koordinator's JSON shape (Go's ``omitempty``); the manager, the scheduler and the descheduler read it back
with :func:`parse_status`: ``parse_status(to_status(s)) == s``. Parsing is lenient: a malformed field is
absent in the view (logged at debug), never an exception, since a half-broken status from one node must not
stop a cluster-wide loop. CPU is in millicores and memory in bytes, rounded up as ``Quantity`` does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordshared.apis.meta.quantity import (
    format_bytes,
    format_duration,
    format_milli,
    format_time,
    parse_duration,
    parse_time,
    to_int,
    to_milli,
)
from koordshared.runtime.errors import InvalidValue

log = logging.getLogger(__name__)

USAGE_WITHOUT_PAGE_CACHE = "usageWithoutPageCache"
USAGE_WITH_HOT_PAGE_CACHE = "usageWithHotPageCache"
USAGE_WITH_PAGE_CACHE = "usageWithPageCache"
MEMORY_COLLECT_POLICIES = (USAGE_WITHOUT_PAGE_CACHE, USAGE_WITH_HOT_PAGE_CACHE, USAGE_WITH_PAGE_CACHE)
AGGREGATIONS = ("avg", "p50", "p90", "p95", "p99")


@dataclass(frozen=True, slots=True)
class CollectPolicy:
    """``spec.metricCollectPolicy`` with koordlet's defaults."""

    aggregate_duration_seconds: int = 300
    report_interval_seconds: int = 60
    durations: tuple[float, ...] = (300.0, 600.0, 1800.0)
    memory_policy: str = USAGE_WITHOUT_PAGE_CACHE

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any] | None) -> CollectPolicy:
        """From a NodeMetric ``spec``; missing or malformed fields keep their defaults."""
        policy = (spec or {}).get("metricCollectPolicy") or {}
        if not isinstance(policy, Mapping):
            return cls()
        d = cls()
        agg = policy.get("aggregateDurationSeconds")
        rep = policy.get("reportIntervalSeconds")
        durations: tuple[float, ...] = d.durations
        raw = (policy.get("nodeAggregatePolicy") or {}).get("durations")
        if isinstance(raw, list) and raw:
            try:
                durations = tuple(parse_duration(str(x)) for x in raw)
            except InvalidValue:
                durations = d.durations
        mem = policy.get("nodeMemoryCollectPolicy")
        return cls(
            aggregate_duration_seconds=agg
            if isinstance(agg, int) and agg > 0
            else d.aggregate_duration_seconds,
            report_interval_seconds=rep if isinstance(rep, int) and rep > 0 else d.report_interval_seconds,
            durations=tuple(x for x in durations if x > 0) or d.durations,
            memory_policy=mem if isinstance(mem, str) and mem else d.memory_policy,
        )

    def to_spec(self) -> dict[str, Any]:
        """The NodeMetric ``spec`` carrying this policy, as koord-manager writes it."""
        return {
            "metricCollectPolicy": {
                "aggregateDurationSeconds": self.aggregate_duration_seconds,
                "reportIntervalSeconds": self.report_interval_seconds,
                "nodeAggregatePolicy": {"durations": [format_duration(d) for d in self.durations]},
                "nodeMemoryCollectPolicy": self.memory_policy,
            }
        }


@dataclass(frozen=True, slots=True)
class Usage:
    """The ``cpu`` and ``memory`` of a ``ResourceMap`` (other resources are not read)."""

    cpu_milli: int = 0
    memory_bytes: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.cpu_milli + other.cpu_milli, self.memory_bytes + other.memory_bytes)


@dataclass(frozen=True, slots=True)
class AggregatedUsage:
    """One ``aggregatedNodeUsages[]`` entry: usage per aggregation (``avg``, ``p50``..) over a window."""

    duration_seconds: float
    usage: Mapping[str, Usage]


@dataclass(frozen=True, slots=True)
class NUMAUsage:
    """One ``numaUsages[]`` entry (a NUMA node without system samples has no ``systemUsage``)."""

    numa_node_id: int
    node_usage: Usage
    system_usage: Usage | None = None


@dataclass(frozen=True, slots=True)
class PodMetric:
    namespace: str
    name: str
    priority: str
    qos: str
    usage: Usage


@dataclass(frozen=True, slots=True)
class HostAppMetric:
    name: str
    priority: str
    qos: str
    usage: Usage


@dataclass(frozen=True, slots=True)
class NodeMetricStatus:
    """What the agent reported; ``update_time`` is seconds since the epoch (``None``: never reported)."""

    update_time: float | None = None
    node_usage: Usage | None = None
    aggregated_node_usages: tuple[AggregatedUsage, ...] = ()
    system_usage: Usage | None = None
    aggregated_system_usages: tuple[AggregatedUsage, ...] = ()
    numa_usages: tuple[NUMAUsage, ...] = ()
    pods_metric: tuple[PodMetric, ...] = ()
    host_application_metric: tuple[HostAppMetric, ...] = ()
    prod_reclaimable: Usage | None = None
    """``None``: the prediction failed (koordlet still writes ``prodReclaimableMetric: {resource: {}}``)."""
    prod_peak: Usage | None = None
    problems: tuple[str, ...] = field(default=(), compare=False)
    """Fields left out because they were malformed (for a log line or an Event)."""


class _Reader:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def usage(self, resource_map: Any, where: str) -> Usage | None:
        """A ``ResourceMap`` (``{resources: {cpu, memory}}``); ``None`` when absent or malformed."""
        if resource_map is None:
            return None
        resources = resource_map.get("resources") if isinstance(resource_map, Mapping) else None
        if resources is None:
            return None
        if not isinstance(resources, Mapping):
            self.problems.append(f"{where}: resources is not an object")
            return None
        try:
            cpu = resources.get("cpu")
            mem = resources.get("memory")
            return Usage(
                to_milli(cpu) if cpu is not None else 0,
                to_int(mem) if mem is not None else 0,
            )
        except (InvalidValue, TypeError) as err:
            self.problems.append(f"{where}: {err}")
            return None

    def aggregated(self, raw: Any, where: str) -> tuple[AggregatedUsage, ...]:
        out: list[AggregatedUsage] = []
        for i, entry in enumerate(raw if isinstance(raw, list) else ()):
            if not isinstance(entry, Mapping):
                continue
            try:
                duration = parse_duration(str(entry.get("duration", "")))
            except InvalidValue as err:
                self.problems.append(f"{where}[{i}].duration: {err}")
                continue
            raw_usage = entry.get("usage")
            usage: Mapping[str, Any] = raw_usage if isinstance(raw_usage, Mapping) else {}
            parsed = {
                name: u
                for name in AGGREGATIONS
                if (u := self.usage(usage.get(name), f"{where}[{i}].{name}")) is not None
            }
            out.append(AggregatedUsage(duration, parsed))
        return tuple(out)


def _items(raw: Any) -> list[Mapping[str, Any]]:
    return [x for x in raw if isinstance(x, Mapping)] if isinstance(raw, list) else []


def parse_status(status: Any) -> NodeMetricStatus:
    """The typed view of a NodeMetric ``status`` (``None`` or ``{}`` -> nothing reported yet)."""
    if not isinstance(status, Mapping):
        return NodeMetricStatus()
    r = _Reader()
    raw_node = status.get("nodeMetric")
    node: Mapping[str, Any] = raw_node if isinstance(raw_node, Mapping) else {}
    pods = []
    for p in _items(status.get("podsMetric")):
        usage = r.usage(p.get("podUsage"), f"podsMetric[{p.get('namespace')}/{p.get('name')}]")
        pods.append(
            PodMetric(
                str(p.get("namespace", "")),
                str(p.get("name", "")),
                str(p.get("priority", "")),
                str(p.get("qos", "")),
                usage or Usage(),
            )
        )
    apps = []
    for a in _items(status.get("hostApplicationMetric")):
        usage = r.usage(a.get("usage"), f"hostApplicationMetric[{a.get('name')}]")
        apps.append(
            HostAppMetric(
                str(a.get("name", "")), str(a.get("priority", "")), str(a.get("qos", "")), usage or Usage()
            )
        )
    reclaimable = status.get("prodReclaimableMetric")
    peak = status.get("prodPeakMetric")
    numa = []
    for n in _items(node.get("numaUsages")):
        nid = n.get("numaNodeID")
        usage = r.usage(n.get("nodeUsage"), f"numaUsages[{nid}].nodeUsage")
        if isinstance(nid, int) and usage is not None:
            numa.append(
                NUMAUsage(nid, usage, r.usage(n.get("systemUsage"), f"numaUsages[{nid}].systemUsage"))
            )
    update_time = parse_time(status.get("updateTime"))
    if status.get("updateTime") is not None and update_time is None:
        r.problems.append(f"updateTime: not an RFC 3339 time: {status.get('updateTime')!r}")
    out = NodeMetricStatus(
        update_time=update_time,
        node_usage=r.usage(node.get("nodeUsage"), "nodeMetric.nodeUsage"),
        aggregated_node_usages=r.aggregated(node.get("aggregatedNodeUsages"), "aggregatedNodeUsages"),
        system_usage=r.usage(node.get("systemUsage"), "nodeMetric.systemUsage"),
        aggregated_system_usages=r.aggregated(node.get("aggregatedSystemUsages"), "aggregatedSystemUsages"),
        numa_usages=tuple(numa),
        pods_metric=tuple(pods),
        host_application_metric=tuple(apps),
        prod_reclaimable=r.usage(
            reclaimable.get("resource") if isinstance(reclaimable, Mapping) else None,
            "prodReclaimableMetric.resource",
        ),
        prod_peak=r.usage(
            peak.get("resource") if isinstance(peak, Mapping) else None, "prodPeakMetric.resource"
        ),
        problems=tuple(r.problems),
    )
    if r.problems:
        log.debug("NodeMetric status: ignoring %s", "; ".join(r.problems))
    return out


def node_usage_problem(status: Any) -> str:
    """Why a NodeMetric ``status`` carries no usable node usage (Koordinator's ``IsValidNodeUsage``:
    ``nodeMetric.nodeUsage.resources`` with both cpu and memory), or empty when it does. A report made
    before the agent had a sample has none, and computing from it would take the node as idle."""
    node = status.get("nodeMetric") if isinstance(status, Mapping) else None
    usage = node.get("nodeUsage") if isinstance(node, Mapping) else None
    resources = usage.get("resources") if isinstance(usage, Mapping) else None
    if not isinstance(resources, Mapping):
        return "node metric is incomplete"
    for name in ("cpu", "memory"):
        if resources.get(name) is None:
            return f"{name} usage is missing"
    return ""


def resource_map(usage: Usage | None) -> dict[str, Any]:
    """A ``ResourceMap``: ``{}`` when empty (koordlet's failed or cold query), else cpu and memory."""
    if usage is None:
        return {}
    return {"resources": {"cpu": format_milli(usage.cpu_milli), "memory": format_bytes(usage.memory_bytes)}}


def _aggregated(items: tuple[AggregatedUsage, ...]) -> list[dict[str, Any]]:
    return [
        {
            "duration": format_duration(a.duration_seconds),
            "usage": {n: resource_map(a.usage.get(n)) for n in AGGREGATIONS},
        }
        for a in items
    ]


def to_status(s: NodeMetricStatus) -> dict[str, Any]:
    """The NodeMetric ``status`` JSON koordlet writes for ``s`` (Go's ``omitempty`` rules)."""
    node: dict[str, Any] = {
        "nodeUsage": resource_map(s.node_usage),
        "systemUsage": resource_map(s.system_usage),
    }
    if s.aggregated_node_usages:
        node["aggregatedNodeUsages"] = _aggregated(s.aggregated_node_usages)
    if s.aggregated_system_usages:
        node["aggregatedSystemUsages"] = _aggregated(s.aggregated_system_usages)
    if s.numa_usages:
        node["numaUsages"] = [
            {"numaNodeID": n.numa_node_id, "nodeUsage": resource_map(n.node_usage)}
            | ({"systemUsage": resource_map(n.system_usage)} if n.system_usage is not None else {})
            for n in s.numa_usages
        ]
    out: dict[str, Any] = {}
    if s.update_time is not None:
        out["updateTime"] = format_time(s.update_time)
    out["nodeMetric"] = node
    if s.pods_metric:
        out["podsMetric"] = [
            _named(p.name, p.priority, p.qos) | {"namespace": p.namespace, "podUsage": resource_map(p.usage)}
            for p in s.pods_metric
        ]
    if s.host_application_metric:
        out["hostApplicationMetric"] = [
            _named(a.name, a.priority, a.qos) | {"usage": resource_map(a.usage)}
            for a in s.host_application_metric
        ]
    out["prodReclaimableMetric"] = {"resource": resource_map(s.prod_reclaimable)}
    if s.prod_peak is not None:
        out["prodPeakMetric"] = {"resource": resource_map(s.prod_peak)}
    return out


def _named(name: str, priority: str, qos: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if priority:
        out["priority"] = priority
    if qos:
        out["qos"] = qos
    return out


Obj = Mapping[str, Any]


class ParsedNodeMetric(Mapping[str, Any]):
    """Read-only; ``status`` is ``None`` when the object had none (a NodeMetric the agent has not
    reported to yet)."""

    __slots__ = ("_head", "has_node_metric", "status")

    def __init__(self, head: Obj, status: NodeMetricStatus | None, *, has_node_metric: bool) -> None:
        self._head = head
        """Everything but the status (apiVersion, kind, metadata, spec), as decoded."""
        self.status = status
        self.has_node_metric = has_node_metric
        """``status.nodeMetric`` was set: without it the agent "reported nothing yet" (LoadAware tells
        the two apart), which the parsed status alone does not say."""

    def __getitem__(self, key: str) -> Any:
        if key == "status" and self.status is not None:
            status = to_status(self.status)
            if not self.has_node_metric:
                del status["nodeMetric"]
            return status
        return self._head[key]

    def __iter__(self) -> Iterator[str]:
        yield from self._head
        if self.status is not None:
            yield "status"

    def __len__(self) -> int:
        return len(self._head) + (self.status is not None)

    def __repr__(self) -> str:
        return f"ParsedNodeMetric({dict(self)!r})"


def parse_node_metric(obj: Obj) -> ParsedNodeMetric:
    """``obj`` with its status parsed (``obj`` itself when it is parsed already)."""
    if isinstance(obj, ParsedNodeMetric):
        return obj
    head = {k: v for k, v in obj.items() if k != "status"}
    raw = obj.get("status")
    if not isinstance(raw, Mapping):
        return ParsedNodeMetric(head, None, has_node_metric=False)
    return ParsedNodeMetric(
        head, parse_status(raw), has_node_metric=isinstance(raw.get("nodeMetric"), Mapping)
    )
