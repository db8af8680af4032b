"""The value types of the plugin contract: pods, node, NodeSLO, metric query results, cgroup writes.

The Koordinator vocabulary (QoS and priority classes) and the typed NodeSLO are defined once in
:mod:`koordshared.apis` (stdlib only) and re-exported here.

Read-only snapshots the agent hands to plugins (frozen dataclasses) and the requests plugins hand back
(:class:`CgroupUpdate`). Kubernetes and Koordinator names are kept: a field says which object field it
mirrors and in which unit (CPU in millicores, memory in bytes) it is held.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from koordshared.apis.core.pod import KubeQOSClass
from koordshared.apis.extension.qos import (
    BATCH_CPU,
    BATCH_MEMORY,
    MID_CPU,
    MID_MEMORY,
    PriorityClass,
    QOSClass,
)
from koordshared.apis.slo.nodeslo import (
    CLASS_KEYS,
    CPUQOS,
    BlkIOQOS,
    BlockCfg,
    CPUBurstStrategy,
    HostApplication,
    IOCfg,
    JSONArray,
    JSONObject,
    JSONValue,
    MemoryQOS,
    NetworkQOS,
    NodeSLO,
    ResctrlQOS,
    ResourceQOS,
    ResourceQOSPolicies,
    ResourceQOSStrategy,
    ResourceThresholdStrategy,
    SystemStrategy,
    blocks,
    json_fields,
)

__all__ = [
    "BATCH_CPU",
    "BATCH_MEMORY",
    "CLASS_KEYS",
    "CPUQOS",
    "LABEL_EVICTION_ENABLED",
    "MID_CPU",
    "MID_MEMORY",
    "NEVER_EVICTED_OWNERS",
    "PRIORITY_VALUE_DEFAULTS",
    "UNKNOWN",
    "BlkIOQOS",
    "BlockCfg",
    "CPUBurstStrategy",
    "CPUInfo",
    "CgroupUpdate",
    "ContainerInfo",
    "HostApplication",
    "IOCfg",
    "JSONArray",
    "JSONObject",
    "JSONValue",
    "KubeQOSClass",
    "MemoryQOS",
    "NetworkQOS",
    "NodeInfo",
    "NodeSLO",
    "PodInfo",
    "PriorityClass",
    "QOSClass",
    "QueryResult",
    "ResctrlQOS",
    "ResctrlUpdate",
    "ResourceQOS",
    "ResourceQOSPolicies",
    "ResourceQOSStrategy",
    "ResourceThresholdStrategy",
    "SystemStrategy",
    "UpdateResult",
    "blocks",
    "json_fields",
]


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    """A container of a pod: identity, cgroup directory and resources (CPU in millicores, memory bytes)."""

    name: str
    container_id: str
    """Bare, validated container ID (runtime prefix stripped); empty while the container is not created."""
    runtime: str = ""
    """``containerd``, ``docker``, ``cri-o``, ... from ``containerStatus.containerID``."""
    cgroup_dir: str = ""
    """Container cgroup directory relative to a subsystem root; empty if unknown."""
    running: bool = True
    cpu_request_milli: int = 0
    cpu_limit_milli: int = 0
    memory_request_bytes: int = 0
    memory_limit_bytes: int = 0
    batch_cpu_request_milli: int = 0
    batch_cpu_limit_milli: int = 0
    batch_memory_request_bytes: int = 0
    batch_memory_limit_bytes: int = 0
    mid_cpu_request_milli: int = 0
    """``kubernetes.io/mid-cpu`` request (millicores, like batch-cpu); koord-mid pods request it."""
    mid_memory_request_bytes: int = 0


LABEL_EVICTION_ENABLED = "koordinator.sh/eviction-enabled"
PRIORITY_VALUE_DEFAULTS: Mapping[PriorityClass, int] = {
    PriorityClass.PROD: 9500,
    PriorityClass.MID: 7500,
    PriorityClass.BATCH: 5500,
    PriorityClass.FREE: 3500,
    PriorityClass.NONE: 0,
}
"""Koordinator's ``GetDefaultPriorityByPriorityClass``: a pod's priority value when ``spec.priority`` is
unset or 0."""
UNKNOWN = -1
"""An extended allocatable (batch, mid) no Node reports: unknown, not zero."""

NEVER_EVICTED_OWNERS = frozenset({"DaemonSet", "Node"})
"""Controller kinds whose pods are never evicted: a DaemonSet pod comes straight back, and a static pod
(owned by its Node) cannot be evicted at all. The evictor refuses them whatever a plugin asks."""


@dataclass(frozen=True, slots=True)
class PodInfo:
    """A pod on this node as the states informer sees it (an immutable snapshot)."""

    uid: str
    """Validated pod UID."""
    namespace: str
    name: str
    qos: QOSClass
    """Koordinator QoS with Koordinator's defaulting (Guaranteed→LSR, Burstable→LS, BestEffort→BE)."""
    kube_qos: KubeQOSClass
    priority_class: PriorityClass = PriorityClass.NONE
    """Priority band with default (from label, else ``spec.priority``, else from QoS)."""
    priority: int | None = None
    """``spec.priority`` if set."""
    phase: str = "Running"
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    cgroup_dir: str = ""
    """Pod cgroup directory relative to a subsystem root, e.g. ``kubepods/besteffort/pod<uid>``."""
    containers: tuple[ContainerInfo, ...] = ()
    node_name: str = ""
    owner_kind: str = ""
    """Kind of the controlling owner (``DaemonSet``, ``ReplicaSet``, ``Node`` for static pods)."""
    created_at: float = 0.0
    """Creation time, seconds since the epoch (0 if unknown)."""
    ips: tuple[str, ...] = ()
    """``status.podIPs`` (validated addresses, IPv4 and/or IPv6); empty until the pod has one."""
    host_network: bool = False
    """``spec.hostNetwork``: the pod shares the node's addresses, so its traffic cannot be told apart."""
    sidecars: tuple[ContainerInfo, ...] = ()
    """Restartable init containers (``restartPolicy: Always``, Kubernetes' sidecars): they run beside
    ``containers`` for the pod's whole life, so what the pod holds counts them too."""
    qos_raw: QOSClass = QOSClass.NONE
    """The class the ``koordinator.sh/qosClass`` label names, without defaulting (Koordinator's
    ``GetPodQoSClassRaw``): ``NONE`` for an unlabelled pod. Koordinator's QoS strategies decide on it: only
    a pod labelled BE is an eviction candidate, and CPU burst skips only pods labelled LSE/LSR/BE."""

    @property
    def is_best_effort(self) -> bool:
        """BE with Koordinator's defaulting (a BE label, or no label and kube BestEffort): the agent's
        evictor refuses any other pod, whatever a plugin asks, unless its owner opted in
        (:attr:`eviction_enabled`)."""
        return self.qos is QOSClass.BE

    @property
    def is_labelled_best_effort(self) -> bool:
        """Labelled ``koordinator.sh/qosClass: BE``: the pods Koordinator's BE strategies evict."""
        return self.qos_raw is QOSClass.BE

    @property
    def is_active(self) -> bool:
        """Pending or Running (Koordinator's ``IsPodActive``)."""
        return self.phase in ("Pending", "Running")

    @property
    def eviction_enabled(self) -> bool:
        """Labelled ``koordinator.sh/eviction-enabled: "true"`` (Koordinator's ``PodEvictEnabled``): the
        pod's owner lets the priority-based strategies (``CPUEvict``, ``MemoryEvict``, the allocatable
        ones) evict it whatever its QoS; the agent's evictor takes no other non-BE pod."""
        return self.labels.get(LABEL_EVICTION_ENABLED) == "true"

    @property
    def priority_value(self) -> int:
        """Koordinator's ``GetPodPriorityValueWithDefault``: ``spec.priority`` when set and not 0, else
        the default value of the pod's priority class (prod 9500, mid 7500, batch 5500, free 3500,
        none 0)."""
        if self.priority:
            return self.priority
        return PRIORITY_VALUE_DEFAULTS[self.priority_class]

    def running_containers(self) -> tuple[ContainerInfo, ...]:
        """App containers and sidecars (restartable init containers): what runs for the pod's life, whose
        requests Koordinator's eviction strategies sum (``GetRequestTypeAndValueFromPod``)."""
        return (*self.containers, *self.sidecars)

    @property
    def cpu_request_milli(self) -> int:
        return sum(c.cpu_request_milli for c in self.containers)

    @property
    def cpu_limit_milli(self) -> int:
        """Sum of container limits; 0 when any container is unlimited."""
        limits = [c.cpu_limit_milli for c in self.containers]
        return 0 if not limits or 0 in limits else sum(limits)

    @property
    def memory_request_bytes(self) -> int:
        return sum(c.memory_request_bytes for c in self.containers)

    @property
    def batch_cpu_request_milli(self) -> int:
        return sum(c.batch_cpu_request_milli for c in self.containers)

    @property
    def batch_memory_request_bytes(self) -> int:
        return sum(c.batch_memory_request_bytes for c in self.containers)


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """The node: capacity and allocatable (CPU millicores, memory bytes), labels and annotations."""

    name: str
    cpu_capacity_milli: int
    memory_capacity_bytes: int
    cpu_allocatable_milli: int = 0
    """0: unknown (treated as the capacity where a figure is needed)."""
    memory_allocatable_bytes: int = 0
    """0: unknown (treated as the capacity where a figure is needed)."""
    batch_cpu_allocatable_milli: int = UNKNOWN
    """``kubernetes.io/batch-cpu`` allocatable; :data:`UNKNOWN` (-1) when no Node reports it (a Node
    without it, or no Node at all: ``--standalone``). Unknown is not zero: a strategy comparing against it
    does nothing (Koordinator's ``getBEMilliAllocatable`` -1), where zero means BE has no room."""
    batch_memory_allocatable_bytes: int = UNKNOWN
    """``kubernetes.io/batch-memory`` allocatable, :data:`UNKNOWN` likewise."""
    mid_cpu_allocatable_milli: int = UNKNOWN
    """``kubernetes.io/mid-cpu`` allocatable (millicores), :data:`UNKNOWN` likewise."""
    mid_memory_allocatable_bytes: int = UNKNOWN
    """``kubernetes.io/mid-memory`` allocatable, :data:`UNKNOWN` likewise."""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    reservation_cpu_milli: int = 0
    """CPU kept from pods by the ``node.koordinator.sh/reservation`` annotation (``resources.cpu``)."""
    reserved_cpus: frozenset[int] = frozenset()
    """CPUs that annotation pins (``reservedCPUs``); no pod, BE included, may use them."""
    kubelet_cpu_manager_policy: str = ""
    """The kubelet's CPU manager policy (``none``, ``static``; empty when unknown). Under ``static`` the
    kubelet writes container cpusets itself, so BE suppression confines containers only."""

    @property
    def cpu_reserved_milli(self) -> int:
        """Capacity minus allocatable (kubelet reservation), never negative."""
        if self.cpu_allocatable_milli <= 0:
            return 0
        return max(self.cpu_capacity_milli - self.cpu_allocatable_milli, 0)


@dataclass(frozen=True, slots=True)
class CPUInfo:
    """One logical CPU and where it sits (``lscpu -e=CPU,NODE,SOCKET,CORE``)."""

    cpu: int
    core: int
    socket: int = 0
    node: int = 0


@dataclass(frozen=True, slots=True)
class QueryResult:
    """An aggregate over a window: the value, how many samples, and the time they span (seconds)."""

    value: float
    count: int
    duration: float


@dataclass(frozen=True, slots=True)
class CgroupUpdate:
    """One cgroup write request. ``resource`` is Koordinator's resource name (the v1 file name)."""

    resource: str
    cgroup_dir: str
    value: str
    owner: str
    """Who asks (the plugin name); owned values are re-applied every force-update period."""
    reason: str = ""
    cacheable: bool = True
    """Skip the write when the cached value is unchanged (still re-applied every force period)."""


@dataclass(frozen=True, slots=True)
class ResctrlUpdate:
    """What one resctrl control group (``LSR``, ``LS``, ``BE``) may use, in Koordinator's terms.

    The executor turns it into a ``schemata`` write for every cache domain: ``l3_percent`` ``(start, end)``
    is a contiguous share of the L3 ways (``catRangeStartPercent``/``catRangeEndPercent``), ``mb_percent``
    the memory bandwidth (``mbaPercent``; Intel rounds up to its granularity, AMD gets absolute units).
    ``None`` leaves that resource as it is.
    """

    group: str
    owner: str
    l3_percent: tuple[int, int] | None = None
    mb_percent: int | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class UpdateResult:
    """What happened to one :class:`CgroupUpdate`."""

    update: CgroupUpdate
    written: bool
    """True if a value was written to the kernel."""
    skipped: str = ""
    """Why nothing was written: ``unchanged``, ``gone``, ``unsupported``, ``dry-run``; empty if written."""
    error: str = ""
    """Non-empty when the write was refused (validation or kernel error), with path and value."""

    @property
    def ok(self) -> bool:
        return not self.error
