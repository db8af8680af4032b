"""Hollow nodes: Node objects without a kubelet or an agent, made Ready and given a fresh NodeMetric
report by the caller, so the scheduler sees them as a real node with an agent (LoadAwareScheduling
filters out a node whose NodeMetric has expired, as Koordinator's does).

kube-controller-manager marks a node without a kubelet's heartbeats ``Ready=Unknown`` after its grace
period (40 s) and taints it soon after: a hollow node is for what happens within that time, or for a
caller that keeps :meth:`HollowNode.heartbeat` going.
"""

from __future__ import annotations

import heapq
import json
import math
import random
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.realcluster.rest import APIError, Rest, parallel

TAINT = "koordlet.test/hollow"
Kubectl = Callable[..., str]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class HollowNode:
    name: str
    kubectl: Kubectl
    capacity: Mapping[str, str] = field(default_factory=lambda: {"cpu": "8", "memory": "16Gi", "pods": "110"})
    taint: bool = True
    """Tainted ``koordlet.test/hollow=true:NoSchedule``: only pods tolerating it land there."""

    def create(self) -> None:
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": {"kubernetes.io/hostname": self.name, TAINT: "true"}},
        }
        if self.taint:
            node["spec"] = {"taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]}
        self.kubectl("apply", "-f", "-", stdin=json.dumps(node))
        self.heartbeat()

    def heartbeat(self) -> None:
        """Ready, with the capacity as allocatable, as the kubelet's status update says."""
        status = {"status": node_status(self.capacity)}
        self.kubectl(
            "patch", "node", self.name, "--subresource=status", "--type=merge", "-p", json.dumps(status)
        )

    def report(self, cpu: str = "500m", memory: str = "1Gi") -> None:
        """A NodeMetric status as the agent reports it (the object exists once koord-manager made it)."""
        usage = {"resources": {"cpu": cpu, "memory": memory}}
        status = {
            "status": {
                "updateTime": _now(),
                "nodeMetric": {"nodeUsage": usage, "systemUsage": {"resources": {"cpu": "0", "memory": "0"}}},
            }
        }
        self.kubectl(
            "patch", "nodemetric", self.name, "--subresource=status", "--type=merge", "-p", json.dumps(status)
        )

    def delete(self) -> None:
        self.kubectl("delete", "node", self.name, "--ignore-not-found", "--wait=false")


# -- many hollow nodes at once, through the REST client (kubectl is a process per call)

NODE_CAPACITY = {"cpu": "4", "memory": "32Gi", "pods": "110"}
"""scheduler_perf's node (``templates/node-default.yaml``): the benchmarks' default."""
NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
NOT_READY = "node.kubernetes.io/not-ready"


def node_status(capacity: Mapping[str, str]) -> dict[str, Any]:
    """Ready now, with the capacity as allocatable, as the kubelet's status update says."""
    now = _now()
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "hollow node",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    return {"capacity": dict(capacity), "allocatable": dict(capacity), "conditions": [ready]}


def node_object(
    name: str,
    *,
    capacity: Mapping[str, str] = NODE_CAPACITY,
    labels: Mapping[str, str] | None = None,
    taint: bool = False,
) -> dict[str, Any]:
    """A Node with its status set on create (kube-apiserver keeps a Node's status on create, as the
    kubelet registers it): Ready, the capacity as allocatable."""
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {},
        "status": node_status(capacity),
    }
    if taint:
        node["spec"]["taints"] = [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]
    return node


def metric_status(cpu_milli: int, memory_bytes: int) -> dict[str, Any]:
    """A NodeMetric status as the agent writes it, reported now. A hollow node runs no pods, so all its
    usage is the system's (the agent reports node usage less its pods' as system usage): koord-manager's
    batch resources then follow the usage."""
    from koordshared.apis.slo.nodemetric import NodeMetricStatus, Usage, to_status

    usage = Usage(cpu_milli, memory_bytes)
    return to_status(NodeMetricStatus(update_time=time.time(), node_usage=usage, system_usage=usage))


def report_metric(rest: Rest, name: str, cpu_milli: int, memory_bytes: int) -> None:
    rest.patch(f"{NODEMETRICS}/{name}/status", {"status": metric_status(cpu_milli, memory_bytes)})


def create_nodes(rest: Rest, nodes: list[dict[str, Any]], *, threads: int = 8) -> None:
    """Create ``nodes``, then take off the ``node.kubernetes.io/not-ready`` taint kube-apiserver's
    TaintNodesByCondition admission puts on every new Node (kube-controller-manager's node lifecycle
    controller takes it off a Ready node; without it, or to be schedulable at once, this does)."""

    def one(node: dict[str, Any]) -> None:
        made = rest.create("/api/v1/nodes", node)
        if any(t.get("key") == NOT_READY for t in (made.get("spec") or {}).get("taints") or []):
            taints = (node.get("spec") or {}).get("taints") or None
            rest.patch(f"/api/v1/nodes/{node['metadata']['name']}", {"spec": {"taints": taints}})

    parallel(one, nodes, threads)


def create_nodemetrics(rest: Rest, usage: Mapping[str, tuple[int, int]], *, threads: int = 8) -> None:
    """A NodeMetric per node with a fresh status (``usage``: node -> (cpu millicores, memory bytes));
    the status subresource drops a status given on create, hence two requests."""

    def one(name: str) -> None:
        meta = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": name}}
        rest.create(NODEMETRICS, meta, exist_ok=True)
        report_metric(rest, name, *usage[name])

    parallel(one, list(usage), threads)


# -- the agents and kubelets of many hollow nodes

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class HollowReporter:
    """A lightweight stand-in for the agent and the kubelet of each of many hollow nodes, at their
    cadences, from one process: every ``report_every`` s a NodeMetric status (the agent's report) whose
    usage drifts (a base load per node, a slow swing, a little noise); every ``lease_every`` s the node's
    Lease in ``kube-node-lease`` renewed and every ``status_every`` s its Ready condition's heartbeat
    (the kubelet's), so kube-controller-manager keeps it Ready. Each node's beats are spread over the
    period as separate agents' would be. :meth:`set_load` changes a node's load and reports at once."""

    rest: Rest
    nodes: list[str]
    cpu_milli: int = 4000
    memory_bytes: int = 32 * 2**30
    report_every: float = 60.0
    lease_every: float = 10.0
    status_every: float = 300.0
    threads: int = 4
    sent: dict[str, int] = field(default_factory=dict)
    """Requests sent by kind (``report``, ``lease``, ``status``) and failed (``error``)."""
    lag: float = 0.0
    """The largest delay of a beat behind its due time, seconds (the reporter keeping up)."""
    _base: dict[str, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _since: str = field(default_factory=_now)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """The Leases made, then the beats running on a thread of their own."""
        for i, n in enumerate(self.nodes):
            self._base.setdefault(n, 0.10 + 0.40 * ((i * 37) % 41) / 40)

        def lease(name: str) -> None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": _micro_now()},
            }
            self.rest.create(LEASES, body, exist_ok=True)

        parallel(lease, self.nodes, self.threads)
        self._thread = threading.Thread(target=self._run, name="hollow-reporter", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def usage(self, name: str, now: float | None = None) -> tuple[int, int]:
        """The node's usage now: (cpu millicores, memory bytes)."""
        now = time.time() if now is None else now
        base = self._base[name]
        phase = (zlib.crc32(name.encode()) % 1000) / 1000 * 2 * math.pi
        swing = 0.08 * math.sin(2 * math.pi * now / 600 + phase)
        noise = random.uniform(-0.02, 0.02)
        cpu = min(max(base + swing + noise, 0.02), 0.98)
        mem = min(max(0.25 + base / 2 + swing / 4, 0.05), 0.95)
        return int(cpu * self.cpu_milli), int(mem * self.memory_bytes)

    def set_load(self, name: str, cpu_fraction: float) -> float:
        """Move the node's base load and report it now; the wall time just before the report is sent."""
        self._base[name] = cpu_fraction
        t = time.time()
        self._beat("report", name)
        return t

    def _beat(self, kind: str, name: str) -> None:
        try:
            if kind == "report":
                report_metric(self.rest, name, *self.usage(name))
            elif kind == "lease":
                self.rest.patch(f"{LEASES}/{name}", {"spec": {"renewTime": _micro_now()}})
            else:
                now = _now()
                ready = {"type": "Ready", "status": "True", "reason": "KubeletReady"}
                ready |= {"lastHeartbeatTime": now, "lastTransitionTime": self._since}
                self.rest.patch(f"/api/v1/nodes/{name}/status", {"status": {"conditions": [ready]}})
        except (APIError, OSError):
            # A NodeMetric koord-manager has not made yet, a server restarting: the next beat tries again.
            kind = "error"
        with self._lock:
            self.sent[kind] = self.sent.get(kind, 0) + 1

    def _run(self) -> None:
        periods = {"report": self.report_every, "lease": self.lease_every, "status": self.status_every}
        start = time.monotonic()
        due: list[tuple[float, int, str, str]] = []
        n = max(len(self.nodes), 1)
        seq = 0
        for kind, period in periods.items():
            for i, name in enumerate(self.nodes):
                seq += 1
                heapq.heappush(due, (start + period * i / n, seq, kind, name))
        with ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="hollow") as pool:
            while not self._stop.is_set():
                at, _, kind, name = due[0]
                wait = at - time.monotonic()
                if wait > 0:
                    self._stop.wait(min(wait, 0.5))
                    continue
                heapq.heapreplace(due, (at + periods[kind], seq, kind, name))
                seq += 1
                self.lag = max(self.lag, -wait)
                pool.submit(self._beat, kind, name)
