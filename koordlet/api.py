"""The stable plugin contract of koordlet: everything a QoS plugin may see. Stdlib only.

A QoS plugin is the Python form of Koordinator's ``ExtensionPlugin`` (``InitFlags``/``Setup``/``Run``) plus
a ``shutdown`` hook. The agent hands it a :class:`PluginContext` of read-only views (pods, node, NodeSLO,
metric cache, host facts), the one resource executor it must write through, the evictor, a clock, a
logger and a scheduler. Plugins import nothing of koordlet but this module (checked by import-linter),
so everything they need is declared here: value types are frozen dataclasses, services are Protocols.

A minimal third-party plugin::

    from koordlet import api

    class Hello(api.QOSPluginBase):
        name = "Hello"
        feature = api.FeatureSpec(default=False, stage=api.Stage.ALPHA)

        def init_flags(self, flags: api.FlagSet) -> None:
            flags.add(api.Flag("hello-interval-seconds", float, 5.0, "how often to say hello"))

        def run(self, stop: threading.Event) -> None:
            self.ctx.every(float(self.ctx.options["hello-interval-seconds"]), self.reconcile)

        def reconcile(self) -> None:
            self.ctx.logger.info("%d pods on %s", len(self.ctx.states.pods()), self.ctx.node_name)

and in its distribution's ``pyproject.toml``::

    [project.entry-points."koordlet.qos_plugins"]
    Hello = "hello_plugin:Hello"

The entry-point name must equal the plugin's ``name``, which is also its gate key:
``koordlet run --qos-extension-plugins=Hello=true``. In-process code may instead call
:func:`register_qos_ext_plugin` before the agent starts. Changes to this module bump :data:`API_VERSION`.
"""

from __future__ import annotations

import enum
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from koordlet.errors import (
    CgroupGone,
    InvalidValue,
    KoordletError,
    PluginError,
    ResourceUnsupported,
    UnsafePath,
)

API_VERSION = 1
"""Bumped on any incompatible change of this module; a plugin may declare ``api_version`` to match."""

# ---------------------------------------------------------------------------------------------------
# Feature gates and flags
# ---------------------------------------------------------------------------------------------------


class Stage(enum.StrEnum):
    """Kubernetes feature maturity; ``AllAlpha``/``AllBeta`` switch every gate of that stage."""

    ALPHA = "Alpha"
    BETA = "Beta"
    GA = "GA"
    DEPRECATED = "Deprecated"


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    """A gate's default state and stage, as Kubernetes' ``featuregate.FeatureSpec``."""

    default: bool
    stage: Stage = Stage.ALPHA
    lock_to_default: bool = False
    """A locked gate (GA) cannot be changed from its default."""


FlagType = type[int] | type[float] | type[str] | type[bool]


@dataclass(frozen=True, slots=True)
class Flag:
    """One command-line option a plugin declares; it becomes ``--<name>`` of ``koordlet run``.

    The parsed value is found in ``ctx.options[name]`` (key without dashes). Environment variable
    ``KOORDLET_<NAME_WITH_UNDERSCORES>`` and the ``--config`` file key ``<name>`` set it too.
    """

    name: str
    type: FlagType
    default: object
    help: str = ""


class FlagSet:
    """The flags a plugin adds in :meth:`QOSPlugin.init_flags` (Go's ``*flag.FlagSet``)."""

    def __init__(self, owner: str = "") -> None:
        self.owner = owner
        self._flags: dict[str, Flag] = {}

    def add(self, flag: Flag) -> None:
        """Declare a flag; a name declared twice is a :class:`PluginError`."""
        if not flag.name or flag.name.startswith("-") or " " in flag.name:
            raise PluginError(self.owner, f"bad flag name {flag.name!r}: use kebab-case without dashes")
        if flag.name in self._flags:
            raise PluginError(self.owner, f"flag --{flag.name} declared twice")
        self._flags[flag.name] = flag

    def __iter__(self) -> Any:
        return iter(self._flags.values())

    def __len__(self) -> int:
        return len(self._flags)

    def __contains__(self, name: object) -> bool:
        return name in self._flags


# ---------------------------------------------------------------------------------------------------
# Kubernetes and Koordinator value types (read-only views handed to plugins)
# ---------------------------------------------------------------------------------------------------


class QOSClass(enum.StrEnum):
    """Koordinator QoS (label ``koordinator.sh/qosClass``; defaulted from the Kubernetes QoS class)."""

    SYSTEM = "SYSTEM"
    LSE = "LSE"
    LSR = "LSR"
    LS = "LS"
    BE = "BE"
    NONE = ""


class KubeQOSClass(enum.StrEnum):
    """Kubernetes QoS class; it picks the kubepods tier (cgroup parent) of the pod."""

    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BESTEFFORT = "BestEffort"


class PriorityClass(enum.StrEnum):
    """Koordinator priority bands (label ``koordinator.sh/priority-class`` or from ``spec.priority``)."""

    PROD = "koord-prod"
    MID = "koord-mid"
    BATCH = "koord-batch"
    FREE = "koord-free"
    NONE = ""


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

    @property
    def is_best_effort(self) -> bool:
        """True only for BE pods: the only pods the agent may throttle or evict for BE strategies."""
        return self.qos is QOSClass.BE

    @property
    def is_active(self) -> bool:
        """Pending or Running (Koordinator's ``IsPodActive``)."""
        return self.phase in ("Pending", "Running")

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
    memory_allocatable_bytes: int = 0
    batch_cpu_allocatable_milli: int = 0
    batch_memory_allocatable_bytes: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

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


# ---------------------------------------------------------------------------------------------------
# The kernel cpu-list syntax (cpuset.cpus, the online CPU list): one implementation for agent and plugins
# ---------------------------------------------------------------------------------------------------

# The kernel's bitmap_parselist also takes "a-b:stride/group"; koordlet never writes it, so refuse it.
_ITEM = re.compile(r"^(\d{1,6})(?:-(\d{1,6}))?$")

MAX_CPU_ID = 65535
"""Above any NR_CPUS a kernel is built with (8192 on common distributions); bounds parse cost."""


def parse_cpuset(text: str, *, resource: str = "cpuset.cpus") -> frozenset[int]:
    """``"0-3,8"`` -> ``{0, 1, 2, 3, 8}``; an empty (or blank) list is the empty set.

    Raises :class:`InvalidValue` on bad syntax, a reversed range or an id above :data:`MAX_CPU_ID`.
    """
    stripped = text.strip()
    if not stripped:
        return frozenset()
    cpus: set[int] = set()
    for item in stripped.split(","):
        m = _ITEM.match(item.strip())
        if m is None:
            raise InvalidValue(resource, text, f"bad cpu list item {item!r}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise InvalidValue(resource, text, f"reversed range {item!r}")
        if hi > MAX_CPU_ID:
            raise InvalidValue(resource, text, f"cpu id {hi} above {MAX_CPU_ID}")
        cpus.update(range(lo, hi + 1))
    return frozenset(cpus)


def format_cpuset(cpus: Iterable[int]) -> str:
    """Canonical kernel form: ascending, consecutive ids collapsed into ``a-b``, e.g. ``"0-3,8"``."""
    ordered = sorted(set(cpus))
    if ordered and ordered[0] < 0:
        raise ValueError(f"negative cpu id {ordered[0]}")
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


# ---------------------------------------------------------------------------------------------------
# NodeSLO (slo.koordinator.sh/v1alpha1), merged over Koordinator's defaults
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourceThresholdStrategy:
    """``spec.resourceUsedThresholdWithBE``; ``None`` means unset (Koordinator's nil)."""

    enable: bool = False
    cpu_suppress_threshold_percent: int = 65
    cpu_suppress_min_percent: int | None = None
    cpu_suppress_policy: str = "cpuset"
    memory_evict_threshold_percent: int = 70
    memory_evict_lower_percent: int | None = None
    cpu_evict_be_satisfaction_lower_percent: int | None = None
    cpu_evict_be_satisfaction_upper_percent: int | None = None
    cpu_evict_be_usage_threshold_percent: int | None = None
    cpu_evict_time_window_seconds: int | None = None
    cpu_evict_policy: str = "evictByRealLimit"


@dataclass(frozen=True, slots=True)
class CPUBurstStrategy:
    """``spec.cpuBurstStrategy``."""

    policy: str = "none"
    cpu_burst_percent: int = 1000
    cfs_quota_burst_percent: int = 300
    cfs_quota_burst_period_seconds: int = -1
    share_pool_threshold_percent: int = 50


@dataclass(frozen=True, slots=True)
class HostApplication:
    """``spec.hostApplications[]``: a non-pod process tree whose usage counts as its QoS class."""

    name: str
    priority: PriorityClass = PriorityClass.NONE
    qos: QOSClass = QOSClass.NONE
    cgroup_base: str = ""
    cgroup_parent_dir: str = ""
    cgroup_relative_path: str = ""


@dataclass(frozen=True, slots=True)
class NodeSLO:
    """The node's SLO policy after validation and merge over Koordinator's defaults."""

    resource_used_threshold_with_be: ResourceThresholdStrategy = field(
        default_factory=ResourceThresholdStrategy
    )
    cpu_burst_strategy: CPUBurstStrategy = field(default_factory=CPUBurstStrategy)
    resource_qos_strategy: Mapping[str, Any] = field(default_factory=dict)
    """Merged ``spec.resourceQOSStrategy`` as JSON (classes ``lsrClass``, ``lsClass``, ``beClass``, ...)."""
    system_strategy: Mapping[str, Any] = field(default_factory=dict)
    host_applications: tuple[HostApplication, ...] = ()
    extensions: Mapping[str, Any] = field(default_factory=dict)
    generation: int = 0
    """Increments each time a new valid NodeSLO takes effect."""


# ---------------------------------------------------------------------------------------------------
# Services a plugin receives (Protocols implemented by the agent, faked in tests)
# ---------------------------------------------------------------------------------------------------

Aggregation = Literal["avg", "last", "count", "p50", "p90", "p95", "p99"]

# Metric kinds (Koordinator's names and units: CPU in cores, memory in bytes, node_be in millicores).
NODE_CPU_USAGE = "node_cpu_usage"
NODE_MEMORY_USAGE = "node_memory_usage"
SYS_CPU_USAGE = "sys_cpu_usage"
SYS_MEMORY_USAGE = "sys_memory_usage"
POD_CPU_USAGE = "pod_cpu_usage"
POD_MEMORY_USAGE = "pod_memory_usage"
CONTAINER_CPU_USAGE = "container_cpu_usage"
CONTAINER_MEMORY_USAGE = "container_memory_usage"
POD_CPU_THROTTLED = "pod_cpu_throttled"
CONTAINER_CPU_THROTTLED = "container_cpu_throttled"
NODE_BE = "node_be"
HOST_APP_CPU_USAGE = "host_application_cpu_usage"
HOST_APP_MEMORY_USAGE = "host_application_memory_usage"
NODE_CPU_USAGE_FAST = "node_cpu_usage_fast"
"""Node CPU (cores) from the fast sampler (~100 ms windows); short retention, for QoS reaction only."""
BE_CPU_USAGE_FAST = "be_cpu_usage_fast"
"""CPU (cores) of the besteffort tier from the fast sampler; pairs with ``NODE_CPU_USAGE_FAST``."""

EVENT_NODE_SAMPLE = "node_sample"
"""Fired after each fast node-level sample, once ``NODE_CPU_USAGE_FAST`` and ``BE_CPU_USAGE_FAST`` hold
it (used for sub-second reaction to LS load; the 1 s ``NODE_CPU_USAGE`` series keeps koordlet's meaning)."""
EVENT_PODS_CHANGED = "pods_changed"
EVENT_NODE_SLO_CHANGED = "node_slo_changed"


@dataclass(frozen=True, slots=True)
class QueryResult:
    """An aggregate over a window: the value, how many samples, and the time they span (seconds)."""

    value: float
    count: int
    duration: float


class MetricReader(Protocol):
    """Read-only view of the metric cache."""

    def query(
        self,
        metric: str,
        *,
        window: float,
        agg: Aggregation = "last",
        labels: Mapping[str, str] | None = None,
    ) -> QueryResult | None:
        """Aggregate ``metric`` over the last ``window`` seconds; ``None`` when there is no sample.

        ``labels`` selects series by Koordinator's property names (``pod_uid``, ``container_id``,
        ``be_allocation``...); a subset of the properties merges every matching series.
        """
        ...


class StatesReader(Protocol):
    """Read-only view of what the states informer knows."""

    def node(self) -> NodeInfo | None: ...

    def pods(self) -> Sequence[PodInfo]: ...

    def node_slo(self) -> NodeSLO: ...

    def has_synced(self) -> bool: ...


class HostReader(Protocol):
    """Facts about the host and read access to cgroups (writes go through :class:`ResourceWriter`)."""

    def cgroup_version(self) -> int:
        """1 or 2 (hybrid hosts with v1 controllers report 1)."""
        ...

    def cpu_topology(self) -> Sequence[CPUInfo]:
        """Online logical CPUs with core/socket/NUMA ids, sorted by CPU id."""
        ...

    def supports(self, resource: str) -> bool:
        """Whether the kernel offers ``resource`` (Koordinator's v1 file name, e.g. ``cpu.cfs_burst_us``)."""
        ...

    def qos_cgroup_dir(self, qos: KubeQOSClass) -> str:
        """The kubepods tier directory (e.g. ``kubepods/besteffort``) relative to a subsystem root."""
        ...

    def read(self, resource: str, cgroup_dir: str) -> str | None:
        """Current value of ``resource`` in ``cgroup_dir``, or ``None`` if the cgroup is gone.

        Raises :class:`ResourceUnsupported` (the kernel lacks the file), :class:`UnsafePath` (a directory
        outside the cgroup root) or :class:`InvalidValue` (unparsable content): all :class:`KoordletError`.
        """
        ...

    def list_cgroups(self, cgroup_dir: str, depth: int) -> Sequence[str]:
        """``cgroup_dir`` and its descendants down to ``depth`` levels, parents before children."""
        ...


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


class ResourceWriter(Protocol):
    """The resource executor: the only way a plugin changes the host."""

    def update(self, update: CgroupUpdate) -> UpdateResult: ...

    def update_batch(self, updates: Sequence[CgroupUpdate]) -> list[UpdateResult]:
        """Apply in order; a failed or vanished item does not stop the rest."""
        ...

    def leveled_update(self, levels: Sequence[Sequence[CgroupUpdate]]) -> list[UpdateResult]:
        """Levels are ``[qos, pods, containers]``: growth applied parents first, shrink children first."""
        ...

    def release(self, owner: str) -> None:
        """Stop re-applying ``owner``'s values (call from ``shutdown`` after restoring them)."""
        ...


class Evictor(Protocol):
    """Evicts pods through the Eviction API or by killing their processes (``--only-evict-by-api``)."""

    def evict(self, pod: PodInfo, reason: str, message: str) -> bool:
        """Evict ``pod``; returns True if it was evicted now or recently (TTL cache)."""
        ...

    def recently_evicted(self, uid: str) -> bool: ...


Scheduler = Callable[[float, Callable[[], None]], None]
"""``every(interval_seconds, fn)``: call ``fn`` now and then every interval until stop; a raising tick is
logged and counted (``koordlet_plugin_tick_errors_total``) and the loop goes on."""


@dataclass(frozen=True)
class PluginContext:
    """Everything a plugin gets in :meth:`QOSPlugin.setup`. Keep it; do no failing I/O in ``setup``."""

    node_name: str
    options: Mapping[str, object]
    """Parsed values of every flag (plugin flags and agent flags), keyed by flag name."""
    states: StatesReader
    metrics: MetricReader
    host: HostReader
    executor: ResourceWriter
    evictor: Evictor
    clock: Callable[[], float]
    """Monotonic seconds; tests pass a fake clock."""
    logger: logging.Logger
    every: Scheduler
    subscribe: Callable[[str, Callable[[], None]], None]
    """``subscribe(EVENT_*, fn)``: ``fn`` runs on the publisher's thread; keep it short."""
    registry: object = None
    """The agent's ``prometheus_client.CollectorRegistry`` for the plugin's own metrics."""
    dry_run: bool = False
    """When true, plugins compute and log decisions; the executor and evictor do not act."""
    wall_clock: Callable[[], float] = field(default=lambda: 0.0)
    """Seconds since the epoch, for timestamps only (never for rates)."""


@runtime_checkable
class QOSPlugin(Protocol):
    """A QoS plugin (Koordinator's ``ExtensionPlugin`` plus ``shutdown``)."""

    name: ClassVar[str]
    """Registry key and feature-gate key, Koordinator's spelling (``CPUBurst``)."""
    feature: ClassVar[FeatureSpec]

    def init_flags(self, flags: FlagSet) -> None:
        """Declare the plugin's options; called for every plugin, enabled or not."""
        ...

    def setup(self, ctx: PluginContext) -> None:
        """Keep the context. Called only when the plugin's gate is enabled."""
        ...

    def run(self, stop: threading.Event) -> None:
        """Start work and return at once (schedule it with ``ctx.every``)."""
        ...

    def shutdown(self) -> None:
        """Restore what the plugin changed; called in reverse start order when the agent stops."""
        ...


class QOSPluginBase:
    """Convenience base: stores the context, no flags, nothing to restore. Override what you need."""

    name: ClassVar[str] = ""
    feature: ClassVar[FeatureSpec] = FeatureSpec(default=False, stage=Stage.ALPHA)
    api_version: ClassVar[int] = API_VERSION
    ctx: PluginContext

    def init_flags(self, flags: FlagSet) -> None:
        return None

    def setup(self, ctx: PluginContext) -> None:
        self.ctx = ctx

    def run(self, stop: threading.Event) -> None:
        return None

    def shutdown(self) -> None:
        return None


REQUIRED_METHODS = ("init_flags", "setup", "run", "shutdown")

_ext_lock = threading.Lock()
_ext_plugins: dict[str, tuple[FeatureSpec, QOSPlugin]] = {}


def register_qos_ext_plugin(name: str, spec: FeatureSpec, plugin: QOSPlugin) -> None:
    """Register an extension plugin in-process (Koordinator's ``RegisterQOSExtPlugin``).

    Must be called before ``koordlet run`` parses its flags. A name registered twice raises
    :class:`PluginError` ("already registered"), as in Koordinator.
    """
    with _ext_lock:
        if name in _ext_plugins:
            raise PluginError(name, "extension plugin already registered")
        _ext_plugins[name] = (spec, plugin)


def registered_ext_plugins() -> dict[str, tuple[FeatureSpec, QOSPlugin]]:
    """A copy of the in-process extension registry."""
    with _ext_lock:
        return dict(_ext_plugins)


def unregister_qos_ext_plugin(name: str) -> None:
    """Remove an in-process registration (for tests and embedding)."""
    with _ext_lock:
        _ext_plugins.pop(name, None)


__all__ = [
    "API_VERSION",
    "MAX_CPU_ID",
    "CPUBurstStrategy",
    "CPUInfo",
    "CgroupGone",
    "CgroupUpdate",
    "ContainerInfo",
    "Evictor",
    "FeatureSpec",
    "Flag",
    "FlagSet",
    "HostApplication",
    "HostReader",
    "InvalidValue",
    "KoordletError",
    "KubeQOSClass",
    "MetricReader",
    "NodeInfo",
    "NodeSLO",
    "PluginContext",
    "PluginError",
    "PodInfo",
    "PriorityClass",
    "QOSClass",
    "QOSPlugin",
    "QOSPluginBase",
    "QueryResult",
    "ResourceThresholdStrategy",
    "ResourceUnsupported",
    "ResourceWriter",
    "Stage",
    "StatesReader",
    "UnsafePath",
    "UpdateResult",
    "format_cpuset",
    "parse_cpuset",
    "register_qos_ext_plugin",
]
