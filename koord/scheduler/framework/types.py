"""What the framework hands plugins about pods and nodes (kube-scheduler's ``framework/types.go``): a
:class:`PodInfo` parsed once per pod object, a :class:`NodeInfo` with the pods on the node and what they
request, and the resource arithmetic both share.

Resources are integers in kube-scheduler's units: ``cpu`` in millicores, everything else as the
quantity's ``Value()`` (memory and ephemeral storage in bytes, ``pods`` and extended resources as counts;
Koordinator's ``kubernetes.io/batch-cpu`` is already in millicores). Objects (pods, nodes) stay the API's
JSON, shared with the caches: read them, never change them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any

from koordshared.apis.core.pod import as_list, as_map, pod_uid
from koordshared.apis.core.resources import parse_resource_list, pod_requests, unit_values, value_of

Obj = Mapping[str, Any]
Resources = dict[str, int]

CPU, MEMORY, PODS, EPHEMERAL = "cpu", "memory", "pods", "ephemeral-storage"
DEFAULT_MILLI_CPU_REQUEST = 100
"""kube-scheduler counts a container without a CPU request as 100m, for scoring only
(``pkg/scheduler/util/pod_resources.go``)."""
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
"""... and one without a memory request as 200 MB, for scoring only."""


def resources_of(raw: Any) -> Resources:
    """A ResourceList object in scheduler units (unparsable entries left out)."""
    fast = unit_values(raw)
    if fast is not None:
        return fast
    return {n: value_of(n, q) for n, q in parse_resource_list(raw).items()}


def _non_zero(pod: Obj, requests: Resources) -> tuple[int, int]:
    """``GetNonzeroRequests``: the pod's cpu and memory requests with the defaults above for each
    container that does not ask (the init-container peak is taken as it is)."""
    cpu = mem = 0
    for c in as_list(as_map(pod, "spec"), "containers"):
        own = resources_of(as_map(as_map(c, "resources"), "requests"))
        cpu += own.get(CPU) or DEFAULT_MILLI_CPU_REQUEST
        mem += own.get(MEMORY) or DEFAULT_MEMORY_REQUEST
    return max(cpu, requests.get(CPU, 0)), max(mem, requests.get(MEMORY, 0))


@dataclass(frozen=True, slots=True)
class HostPort:
    ip: str
    protocol: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        """Same port and protocol, and the same IP or either on every address (``0.0.0.0``)."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.ip == other.ip or "0.0.0.0" in (self.ip, other.ip)


def host_ports(pod: Obj) -> tuple[HostPort, ...]:
    out = []
    spec = as_map(pod, "spec")
    for c in (*as_list(spec, "containers"), *as_list(spec, "initContainers")):
        for p in as_list(c, "ports"):
            port = p.get("hostPort") if isinstance(p, Mapping) else None
            if isinstance(port, int) and not isinstance(port, bool) and port > 0:
                out.append(HostPort(str(p.get("hostIP") or "0.0.0.0"), str(p.get("protocol") or "TCP"), port))
    return tuple(out)


_RESOURCE_FACTS: dict[tuple[Any, ...], tuple[Resources, int, int]] = {}
_RESOURCE_FACTS_MAX = 1 << 16


def _shared_facts(requests: Resources, non_zero: tuple[int, int]) -> tuple[Resources, int, int]:
    """One (requests, non-zero cpu, non-zero memory) object per distinct value: pods of one template
    ask for the same, and a cache of 100 000 pods then holds a few hundred of them (they are read-only).
    The table starts over when it gets large, which only costs sharing."""
    key = (*sorted(requests.items()), *non_zero)
    got = _RESOURCE_FACTS.get(key)
    if got is None:
        if len(_RESOURCE_FACTS) >= _RESOURCE_FACTS_MAX:
            _RESOURCE_FACTS.clear()
        got = _RESOURCE_FACTS[key] = (requests, *non_zero)
    return got


_NO_AFFINITY: Mapping[str, Any] = MappingProxyType({})


class PodInfo:
    """One pod object and what the framework derives from it once (requests, priority, ports...).
    ``requests`` is shared among pods asking for the same: never change it."""

    __slots__ = (
        "__dict__",
        "affinity",
        "host_ports",
        "name",
        "namespace",
        "node_name",
        "non_zero_cpu",
        "non_zero_memory",
        "pod",
        "priority",
        "requests",
        "uid",
    )

    def __init__(self, pod: Obj) -> None:
        self.pod = pod
        meta = as_map(pod, "metadata")
        spec = as_map(pod, "spec")
        self.name = str(meta.get("name") or "")
        self.namespace = str(meta.get("namespace") or "")
        self.uid = str(meta.get("uid") or f"{self.namespace}/{self.name}")
        self.node_name = str(spec.get("nodeName") or "")
        prio = spec.get("priority")
        self.priority = prio if isinstance(prio, int) and not isinstance(prio, bool) else 0
        requests = pod_requests(pod)
        self.requests, self.non_zero_cpu, self.non_zero_memory = _shared_facts(
            requests, _non_zero(pod, requests)
        )
        # Every cached pod is asked these when it joins a node: plain slots, not a per-pod __dict__.
        self.host_ports: tuple[HostPort, ...] = host_ports(pod)
        affinity = spec.get("affinity")
        self.affinity: Mapping[str, Any] = affinity if isinstance(affinity, Mapping) else _NO_AFFINITY

    @staticmethod
    def uid_of(pod: Obj) -> str:
        """The ``uid`` a PodInfo of ``pod`` has, without parsing the pod."""
        return pod_uid(pod)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def labels(self) -> Mapping[str, str]:
        return as_map(as_map(self.pod, "metadata"), "labels")

    @property
    def spec(self) -> Mapping[str, Any]:
        return as_map(self.pod, "spec")

    @cached_property
    def memo(self) -> dict[str, Any]:
        """Where plugins keep what they derive from the pod object (parsed affinity terms...), as
        :attr:`NodeInfo.memo` for the node: a changed pod is a new PodInfo, with an empty memo."""
        return {}

    @property
    def has_pod_affinity(self) -> bool:
        aff = self.affinity
        return bool(aff.get("podAffinity") or aff.get("podAntiAffinity"))

    @property
    def has_required_anti_affinity(self) -> bool:
        anti = as_map(self.affinity, "podAntiAffinity")
        return bool(anti.get("requiredDuringSchedulingIgnoredDuringExecution"))

    @property
    def is_terminating(self) -> bool:
        return bool(as_map(self.pod, "metadata").get("deletionTimestamp"))

    def __repr__(self) -> str:
        return f"PodInfo({self.key}{' on ' + self.node_name if self.node_name else ''})"


class NodeInfo:
    """One node: ``node`` (the Node object; ``None`` while only its pods are known), the pods on it
    (assumed ones included) and what they request, its allocatable resources, used host ports, and
    ``memo``, a dict where plugins keep what they derive from the node object (it starts empty again
    when the object changes). ``generation`` grows on every change; ``index`` is the node's row in the
    snapshot's arrays."""

    __slots__ = (
        "allocatable",
        "generation",
        "index",
        "memo",
        "name",
        "node",
        "non_zero_cpu",
        "non_zero_memory",
        "pods",
        "pods_with_affinity",
        "pods_with_required_anti_affinity",
        "requested",
        "used_ports",
    )

    def __init__(self, name: str, node: Obj | None) -> None:
        self.name = name
        self.node = node
        self.memo: dict[str, Any] = {}
        self.pods: dict[str, PodInfo] = {}
        self.requested: Resources = {}
        self.non_zero_cpu = 0
        self.non_zero_memory = 0
        self.used_ports: list[HostPort] = []
        self.pods_with_affinity: list[PodInfo] = []
        self.pods_with_required_anti_affinity: list[PodInfo] = []
        self.allocatable: Resources = resources_of(as_map(as_map(node, "status"), "allocatable"))
        self.generation = 0
        self.index = -1

    def set_node(self, node: Obj) -> None:
        if node is not self.node:
            self.node = node
            self.memo = {}
            self.allocatable = resources_of(as_map(as_map(node, "status"), "allocatable"))

    def add_pod(self, info: PodInfo) -> None:
        self.pods[info.uid] = info
        self._account(info, 1)

    def remove_pod(self, uid: str) -> PodInfo | None:
        info = self.pods.pop(uid, None)
        if info is not None:
            self._account(info, -1)
        return info

    def _account(self, info: PodInfo, sign: int) -> None:
        req = self.requested
        for name, value in info.requests.items():
            req[name] = req.get(name, 0) + sign * value
        req[PODS] = req.get(PODS, 0) + sign
        self.non_zero_cpu += sign * info.non_zero_cpu
        self.non_zero_memory += sign * info.non_zero_memory
        if sign > 0:
            self.used_ports.extend(info.host_ports)
            if info.has_pod_affinity:
                self.pods_with_affinity.append(info)
            if info.has_required_anti_affinity:
                self.pods_with_required_anti_affinity.append(info)
        else:
            for port in info.host_ports:
                self.used_ports.remove(port)
            for group in (self.pods_with_affinity, self.pods_with_required_anti_affinity):
                if info in group:
                    group.remove(info)

    def clone(self) -> NodeInfo:
        """A copy whose pod accounting can change without touching this one (the node object and the
        pods' objects are shared, never changed)."""
        out = NodeInfo.__new__(NodeInfo)
        out.name, out.node, out.memo = self.name, self.node, self.memo
        out.pods = dict(self.pods)
        out.requested = dict(self.requested)
        out.non_zero_cpu, out.non_zero_memory = self.non_zero_cpu, self.non_zero_memory
        out.used_ports = list(self.used_ports)
        out.pods_with_affinity = list(self.pods_with_affinity)
        out.pods_with_required_anti_affinity = list(self.pods_with_required_anti_affinity)
        out.allocatable = self.allocatable
        out.generation, out.index = self.generation, self.index
        return out

    @property
    def labels(self) -> Mapping[str, str]:
        return as_map(as_map(self.node, "metadata"), "labels")

    @property
    def taints(self) -> Sequence[Mapping[str, Any]]:
        return [t for t in as_list(as_map(self.node, "spec"), "taints") if isinstance(t, Mapping)]

    def __repr__(self) -> str:
        return f"NodeInfo({self.name!r}{'' if self.node is not None else ', unknown'}, {len(self.pods)} pods)"


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """A PreFilter plugin's answer that only these nodes can fit the pod (``None``: all nodes); the
    framework intersects the answers of every PreFilter plugin."""

    node_names: frozenset[str] | None = None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return other
        return PreFilterResult(self.node_names & other.node_names)


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """A PostFilter plugin's answer: the node the pod was nominated to (preemption), if any."""

    nominated_node_name: str = ""
