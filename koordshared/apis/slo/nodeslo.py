"""The NodeSLO (``slo.koordinator.sh/v1alpha1``): the typed spec after validation and merge, and
:func:`build`, which makes it from a NodeSLO's spec.

The merge is Koordinator's: each section of the spec is laid over the default section and only fields
that are present and not ``null`` override. The agent applies it to the NodeSLO it reads and hands the
typed values to QoS plugins (``koordlet.api`` re-exports them); koord-manager renders NodeSLOs over the
same defaults, so both sides agree on what an absent field means. Validation lives in :mod:`.validate`;
unknown fields are ignored with a debug line, as the API server would prune them. Pure: stdlib only.
"""

from __future__ import annotations

import copy
import logging
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypeAlias, Union

from koordshared.apis.extension import qos as extension
from koordshared.apis.extension.qos import PriorityClass, QOSClass
from koordshared.apis.meta import quantity
from koordshared.apis.slo.validate import InvalidNodeSLO, validate_spec

JSONValue: TypeAlias = Union[str, int, float, bool, "JSONArray", "JSONObject", None]
"""A JSON document as ``json.loads`` returns it (the parts of a NodeSLO the agent passes on as is)."""
JSONArray: TypeAlias = Sequence[JSONValue]
JSONObject: TypeAlias = Mapping[str, JSONValue]


@dataclass(frozen=True, slots=True)
class ResourceThresholdStrategy:
    """``spec.resourceUsedThresholdWithBE``; ``None`` means unset (Koordinator's nil).

    The agent refuses a NodeSLO whose values are out of range or contradict each other before it takes
    effect, so plugins act on these values without checking them again.
    """

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
    cpu_evict_threshold_percent: int | None = None
    """``CPUEvict``: node CPU usage (percent of capacity) from which pods are evicted."""
    cpu_evict_lower_percent: int | None = None
    """``CPUEvict`` releases down to this (by default 2 points below the threshold)."""
    cpu_allocatable_evict_threshold_percent: int | None = None
    """``CPUAllocatableEvict``: batch/mid CPU requests (percent of their allocatable) from which pods are
    evicted (may exceed 100)."""
    cpu_allocatable_evict_lower_percent: int | None = None
    memory_allocatable_evict_threshold_percent: int | None = None
    """``MemoryAllocatableEvict``, as ``cpuAllocatableEvictThresholdPercent`` for memory."""
    memory_allocatable_evict_lower_percent: int | None = None
    evict_enabled_priority_threshold: int | None = None
    """``CPUEvict``/``MemoryEvict`` evict only pods of this priority value or lower."""
    allocatable_evict_priority_threshold: int | None = None
    """The allocatable strategies evict only pods of this priority value or lower (below koord-prod)."""

    @property
    def memory_evict_lower(self) -> int:
        """Where memory eviction stops: ``memoryEvictLowerPercent``, by default 2 points below the
        threshold (koordlet's ``defaultMemoryReleaseBufferPercent``)."""
        lower = self.memory_evict_lower_percent
        return self.memory_evict_threshold_percent - 2 if lower is None else lower

    @property
    def cpu_evict_lower(self) -> int | None:
        """Where ``CPUEvict`` stops: ``cpuEvictLowerPercent``, by default 2 points below the threshold
        (koordlet's ``cpuReleaseBufferPercent``); ``None`` without a threshold."""
        threshold, lower = self.cpu_evict_threshold_percent, self.cpu_evict_lower_percent
        if threshold is None:
            return None
        return threshold - 2 if lower is None else lower


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
class NetworkQOS:
    """``resourceQOSStrategy.<class>.networkQOS`` resolved to bits per second: an integer in the NodeSLO is
    a percent of ``systemStrategy.totalNetworkBandwidth``, a string a quantity (``50M``); 0 is unset."""

    enable: bool = False
    ingress_request_bps: int = 0
    ingress_limit_bps: int = 0
    egress_request_bps: int = 0
    egress_limit_bps: int = 0


@dataclass(frozen=True, slots=True)
class CPUQOS:
    """``resourceQOSStrategy.<class>.cpuQOS`` (Koordinator's ``CPUQOSCfg``): group identity (``-1`` BE,
    ``0`` none, ``1``/``2`` LS), ``schedIdle`` and ``coreExpeller``. The defaults are Koordinator's
    neutral values, which also replace a disabled section's."""

    enable: bool = False
    group_identity: int = 0
    sched_idle: int = 0
    core_expeller: bool = False


@dataclass(frozen=True, slots=True)
class ResctrlQOS:
    """``resourceQOSStrategy.<class>.resctrlQOS`` (``ResctrlQOSCfg``): the class's contiguous share of
    the L3 ways (``catRangeStartPercent``..``catRangeEndPercent``) and memory bandwidth (``mbaPercent``)."""

    enable: bool = False
    cat_range_start_percent: int = 0
    cat_range_end_percent: int = 100
    mba_percent: int = 100


@dataclass(frozen=True, slots=True)
class MemoryQOS:
    """``resourceQOSStrategy.<class>.memoryQOS`` (``MemoryQOSCfg``): percents of the request protected
    (``minLimitPercent``, ``lowLimitPercent``) and throttled at (``throttlingPercent``), and the Anolis
    knobs' values (``wmarkRatio``, ``wmarkScalePermill``, ``wmarkMinAdj``, ``priorityEnable``,
    ``priority``, ``oomKillGroup``); the defaults are Koordinator's neutral values."""

    enable: bool = False
    min_limit_percent: int = 0
    low_limit_percent: int = 0
    throttling_percent: int = 0
    wmark_ratio: int = 0
    wmark_scale_permill: int = 50
    wmark_min_adj: int = 0
    priority_enable: int = 0
    priority: int = 0
    oom_kill_group: int = 0


@dataclass(frozen=True, slots=True)
class IOCfg:
    """A block's ``ioCfg`` (Koordinator's ``IOCfg``); ``None`` is unset (the plugin's default applies):
    throttles ``readIOPS`` ``writeIOPS`` ``readBPS`` ``writeBPS``, ``ioWeightPercent``, the root's iocost
    latency targets (``readLatency``/``writeLatency`` in us at ``readLatencyPercent``/
    ``writeLatencyPercent``) and its user cost model (``enableUserModel``, ``model*``)."""

    read_iops: int | None = None
    write_iops: int | None = None
    read_bps: int | None = None
    write_bps: int | None = None
    io_weight_percent: int | None = None
    read_latency: int | None = None
    write_latency: int | None = None
    read_latency_percent: int | None = None
    write_latency_percent: int | None = None
    enable_user_model: bool | None = None
    model_read_bps: int | None = None
    model_write_bps: int | None = None
    model_read_seq_iops: int | None = None
    model_write_seq_iops: int | None = None
    model_read_rand_iops: int | None = None
    model_write_rand_iops: int | None = None


@dataclass(frozen=True, slots=True)
class BlockCfg:
    """One of ``blkioQOS.blocks`` (Koordinator's ``BlockCfg``): a block by ``name`` of ``type``
    (``device``, ``volumegroup``, ``podvolume``) and its ``ioCfg``."""

    name: str = ""
    type: str = "device"
    io_cfg: IOCfg = field(default_factory=IOCfg)


@dataclass(frozen=True, slots=True)
class BlkIOQOS:
    """``resourceQOSStrategy.<class>.blkioQOS`` (``BlkIOQOSCfg``)."""

    enable: bool = False
    blocks: tuple[BlockCfg, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceQOS:
    """One class of ``resourceQOSStrategy`` (Koordinator's ``ResourceQOS``): ``cpuQOS``, ``resctrlQOS``,
    ``memoryQOS``, ``blkioQOS``, ``networkQOS``."""

    cpu_qos: CPUQOS = field(default_factory=CPUQOS)
    resctrl_qos: ResctrlQOS = field(default_factory=ResctrlQOS)
    memory_qos: MemoryQOS = field(default_factory=MemoryQOS)
    blkio_qos: BlkIOQOS = field(default_factory=BlkIOQOS)
    network_qos: NetworkQOS = field(default_factory=NetworkQOS)


@dataclass(frozen=True, slots=True)
class ResourceQOSPolicies:
    """``resourceQOSStrategy.policies``: ``cpuPolicy`` (``groupIdentity``, ``coreSched``) and
    ``netQOSPolicy`` (``tc``, ``terway-qos``)."""

    cpu_policy: str = "groupIdentity"
    net_qos_policy: str = "tc"


CLASS_KEYS = ("lsrClass", "lsClass", "beClass", "systemClass", "cgroupRoot")
"""The classes of ``resourceQOSStrategy`` by their NodeSLO keys (LSE pods follow ``lsrClass``)."""


@dataclass(frozen=True, slots=True)
class ResourceQOSStrategy:
    """``spec.resourceQOSStrategy`` (Koordinator's ``ResourceQOSStrategy``), merged and with disabled
    ``cpuQOS``/``resctrlQOS``/``memoryQOS`` sections set to their neutral values, as koordlet sees it."""

    policies: ResourceQOSPolicies = field(default_factory=ResourceQOSPolicies)
    lsr_class: ResourceQOS = field(default_factory=ResourceQOS)
    ls_class: ResourceQOS = field(default_factory=ResourceQOS)
    be_class: ResourceQOS = field(default_factory=ResourceQOS)
    system_class: ResourceQOS = field(default_factory=ResourceQOS)
    cgroup_root: ResourceQOS = field(default_factory=ResourceQOS)

    def of(self, key: str) -> ResourceQOS:
        """The class named by its NodeSLO key (one of :data:`CLASS_KEYS`)."""
        return getattr(self, snake(key))  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class SystemStrategy:
    """``spec.systemStrategy`` (Koordinator's ``SystemStrategy``); ``None`` is unset (left alone).

    ``totalNetworkBandwidth`` is :attr:`NodeSLO.total_network_bandwidth_bps`.
    """

    min_free_kbytes_factor: int | None = None
    watermark_scale_factor: int | None = None
    memcg_reap_back_ground: int | None = None
    sched_group_identity_enabled: int | None = None
    sched_idle_saver_wmark: int | None = None
    page_cache_limit_enabled: int | None = None
    sched_features: Mapping[str, bool] = field(default_factory=dict)
    """``schedFeatures``: scheduler feature name -> on/off."""


def snake(name: str) -> str:
    """A NodeSLO field name in Python: ``cpuEvictBEUsageThresholdPercent`` ->
    ``cpu_evict_be_usage_threshold_percent``, ``readIOPS`` -> ``read_iops``."""
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)).lower()


_KINDS: dict[type[Any], Mapping[str, tuple[type, ...]]] = {}


def _kinds(cls: type[Any]) -> Mapping[str, tuple[type, ...]]:
    """Field -> the JSON scalar types it takes (``int`` never takes a bool); worked out once per class."""
    kinds = _KINDS.get(cls)
    if kinds is None:
        hints = typing.get_type_hints(cls)
        kinds = {
            f.name: tuple(
                a for a in typing.get_args(hints[f.name]) or (hints[f.name],) if a in (int, bool, str)
            )
            for f in fields(cls)
        }
        _KINDS[cls] = kinds
    return kinds


def json_fields(cls: type[Any], obj: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The scalar fields of dataclass ``cls`` that ``obj`` (a NodeSLO section, or a pod annotation of the
    same shape) sets with a value of the field's type, by their camelCase names, and the keys of ``obj``
    that name no field. A value of another type, or ``null``, is skipped: a NodeSLO has been validated
    before this, and an annotation's odd field must not stop its other fields."""
    kinds = _kinds(cls)
    out: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in obj.items():
        name = snake(key)
        if name not in kinds:
            unknown.append(key)
        elif isinstance(value, kinds[name]) and not (isinstance(value, bool) and bool not in kinds[name]):
            out[name] = value
    return out, unknown


def blocks(raw: Any) -> tuple[BlockCfg, ...]:
    """``blocks`` of a ``blkioQOS`` section or a ``koordinator.sh/blkioQOS`` annotation; entries that are
    not objects are skipped, and so are fields of the wrong type (see :func:`json_fields`)."""
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        return ()
    out = []
    for block in raw:
        if isinstance(block, Mapping):
            io = block.get("ioCfg")
            io_cfg = IOCfg(**json_fields(IOCfg, io)[0]) if isinstance(io, Mapping) else IOCfg()
            out.append(BlockCfg(**json_fields(BlockCfg, block)[0], io_cfg=io_cfg))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class NodeSLO:
    """The node's SLO policy after validation and merge over Koordinator's defaults."""

    resource_used_threshold_with_be: ResourceThresholdStrategy = field(
        default_factory=ResourceThresholdStrategy
    )
    cpu_burst_strategy: CPUBurstStrategy = field(default_factory=CPUBurstStrategy)
    resource_qos: ResourceQOSStrategy = field(default_factory=ResourceQOSStrategy)
    """``spec.resourceQOSStrategy``, typed."""
    system: SystemStrategy = field(default_factory=SystemStrategy)
    """``spec.systemStrategy``, typed."""
    resource_qos_strategy: JSONObject = field(default_factory=dict)
    """The same merged ``spec.resourceQOSStrategy`` as JSON, kept for plugins written before
    :attr:`resource_qos` (read that instead: it is validated and typed once)."""
    system_strategy: JSONObject = field(default_factory=dict)
    """The merged ``spec.systemStrategy`` as JSON, kept for plugins written before :attr:`system`."""
    host_applications: tuple[HostApplication, ...] = ()
    extensions: JSONObject = field(default_factory=dict)
    total_network_bandwidth_bps: int = 0
    """``systemStrategy.totalNetworkBandwidth`` in bits per second (0: unknown)."""
    network_qos: Mapping[str, NetworkQOS] = field(default_factory=dict)
    """Each class's network QoS by its ``resourceQOSStrategy`` key (``lsClass``, ``beClass``...); the
    same values as ``resource_qos.<class>.network_qos``, kept for plugins written before them."""
    generation: int = 0
    """Increments each time a new valid NodeSLO takes effect."""


__all__ = ["InvalidNodeSLO", "build", "default_spec", "merge", "validate_spec"]

log = logging.getLogger(__name__)

_NONE_CPU_QOS = {"groupIdentity": 0, "schedIdle": 0, "coreExpeller": False}
_NONE_RESCTRL_QOS = {"catRangeStartPercent": 0, "catRangeEndPercent": 100, "mbaPercent": 100}
_NONE_MEMORY_QOS = {
    "minLimitPercent": 0,
    "lowLimitPercent": 0,
    "throttlingPercent": 0,
    "wmarkRatio": 0,
    "wmarkScalePermill": 50,
    "wmarkMinAdj": 0,
    "priorityEnable": 0,
    "priority": 0,
    "oomKillGroup": 0,
}


def _qos_class(gi: int, core_expeller: bool, cat_end: int, wmark_ratio: int, permill: int, adj: int) -> Any:
    return {
        "cpuQOS": {"enable": False, "groupIdentity": gi, "schedIdle": 0, "coreExpeller": core_expeller},
        "resctrlQOS": {
            "enable": False,
            "catRangeStartPercent": 0,
            "catRangeEndPercent": cat_end,
            "mbaPercent": 100,
        },
        "memoryQOS": {
            "enable": False,
            **_NONE_MEMORY_QOS,
            "wmarkRatio": wmark_ratio,
            "wmarkScalePermill": permill,
            "wmarkMinAdj": adj,
        },
        "blkioQOS": {"enable": False, "blocks": []},
        "networkQOS": {
            "enable": False,
            "ingressRequest": 0,
            "ingressLimit": 0,
            "egressRequest": 0,
            "egressLimit": 0,
        },
    }


def default_spec() -> dict[str, Any]:
    """Koordinator's ``DefaultNodeSLOSpecConfig`` (fields that default to nil are absent)."""
    return {
        "resourceUsedThresholdWithBE": {
            "enable": False,
            "cpuSuppressThresholdPercent": 65,
            "cpuSuppressPolicy": "cpuset",
            "memoryEvictThresholdPercent": 70,
            "cpuEvictPolicy": "evictByRealLimit",
        },
        "resourceQOSStrategy": {
            "policies": {"cpuPolicy": "groupIdentity", "netQOSPolicy": "tc"},
            "lsrClass": _qos_class(2, True, 100, 95, 20, -25),
            "lsClass": _qos_class(2, True, 100, 95, 20, -25),
            "beClass": _qos_class(-1, False, 30, 95, 20, 50),
            "systemClass": _qos_class(0, False, 100, 0, 50, 0),
            "cgroupRoot": _qos_class(0, False, 100, 0, 50, 0),
        },
        "cpuBurstStrategy": {
            "policy": "none",
            "cpuBurstPercent": 1000,
            "cfsQuotaBurstPercent": 300,
            "cfsQuotaBurstPeriodSeconds": -1,
            "sharePoolThresholdPercent": 50,
        },
        "systemStrategy": {"totalNetworkBandwidth": "0"},
        "hostApplications": [],
        "extensions": {},
    }


def merge(base: Any, over: Any) -> Any:
    """``over`` laid onto ``base``: mappings merge key by key, ``null`` keeps the base, other values
    (lists included) replace it. Inputs are not modified."""
    if over is None:
        return copy.deepcopy(base)
    if isinstance(base, Mapping) and isinstance(over, Mapping):
        out = {k: copy.deepcopy(v) for k, v in base.items()}
        for key, value in over.items():
            out[key] = merge(base.get(key), value) if key in base else copy.deepcopy(value)
        return out
    return copy.deepcopy(over)


def _fields(cls: type[Any], sec: Mapping[str, Any]) -> dict[str, Any]:
    known, unknown = json_fields(cls, sec)
    for key in unknown:
        log.debug("NodeSLO: ignoring unknown field %s", key)
    return known


def _host_app(app: Mapping[str, Any]) -> HostApplication:
    cg = app.get("cgroupPath") or {}
    return HostApplication(
        name=str(app["name"]),
        priority=extension.PriorityClass(app.get("priority") or ""),
        qos=extension.QOSClass(app.get("qos") or ""),
        cgroup_base=str(cg.get("base") or ""),
        cgroup_parent_dir=str(cg.get("parentDir") or ""),
        cgroup_relative_path=str(cg.get("relativePath") or ""),
    )


def _disable_off_sections(qos: dict[str, Any]) -> None:
    # Koordinator replaces a disabled sub-config by its "None" values so plugins see neutral settings.
    for cls in ("lsrClass", "lsClass", "beClass"):
        section = qos.get(cls)
        if not isinstance(section, dict):
            continue
        for key, neutral in (
            ("cpuQOS", _NONE_CPU_QOS),
            ("resctrlQOS", _NONE_RESCTRL_QOS),
            ("memoryQOS", _NONE_MEMORY_QOS),
        ):
            sub = section.get(key)
            if isinstance(sub, dict) and sub.get("enable") is False:
                sub.update(neutral)


_NETWORK_FIELDS = {
    "ingressRequest": "ingress_request_bps",
    "ingressLimit": "ingress_limit_bps",
    "egressRequest": "egress_request_bps",
    "egressLimit": "egress_limit_bps",
}


def bandwidth_bps(value: Any, total_bps: int) -> int:
    """Koordinator's IntOrString bandwidth: an integer or a ``"N%"`` string is a percent of ``total_bps``,
    another string a quantity in bits per second (validation has refused anything else). Koordinator's
    agent reads ``"50%"`` as an unparsable quantity, 0; the IntOrString convention is a percent."""
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, str) and value.endswith("%"):
        value = int(value[:-1])
    if isinstance(value, int):
        return total_bps * value // 100
    return quantity.to_int(str(value))


def _network_qos(net: Mapping[str, Any], total_bps: int) -> NetworkQOS:
    values = {attr: bandwidth_bps(net.get(f), total_bps) for f, attr in _NETWORK_FIELDS.items()}
    return NetworkQOS(enable=net.get("enable") is True, **values)


def _class(section: Mapping[str, Any], total_bps: int) -> ResourceQOS:
    def sub(key: str) -> Mapping[str, Any]:
        value = section.get(key)
        return value if isinstance(value, Mapping) else {}

    blkio = sub("blkioQOS")
    return ResourceQOS(
        cpu_qos=CPUQOS(**_fields(CPUQOS, sub("cpuQOS"))),
        resctrl_qos=ResctrlQOS(**_fields(ResctrlQOS, sub("resctrlQOS"))),
        memory_qos=MemoryQOS(**_fields(MemoryQOS, sub("memoryQOS"))),
        blkio_qos=BlkIOQOS(enable=blkio.get("enable") is True, blocks=blocks(blkio.get("blocks"))),
        network_qos=_network_qos(sub("networkQOS"), total_bps),
    )


def _resource_qos(qos: Mapping[str, Any], total_bps: int) -> ResourceQOSStrategy:
    policies = qos.get("policies") or {}
    classes = {snake(key): _class(qos.get(key) or {}, total_bps) for key in CLASS_KEYS}
    return ResourceQOSStrategy(
        policies=ResourceQOSPolicies(**_fields(ResourceQOSPolicies, policies)), **classes
    )


def _system(sec: Mapping[str, Any]) -> SystemStrategy:
    known, _ = json_fields(SystemStrategy, sec)  # totalNetworkBandwidth is read apart
    features = sec.get("schedFeatures") or {}
    return SystemStrategy(**known, sched_features=dict(features))


def build(spec: Mapping[str, Any] | None, generation: int = 0) -> NodeSLO:
    """Validate ``spec`` and merge it over the defaults (``None`` -> the defaults)."""
    if spec is not None:
        validate_spec(spec)
    merged = merge(default_spec(), spec or {})
    qos = merged["resourceQOSStrategy"]
    _disable_off_sections(qos)
    thresholds = ResourceThresholdStrategy(
        **_fields(ResourceThresholdStrategy, merged["resourceUsedThresholdWithBE"])
    )
    _check_merged(thresholds)
    total_bps = quantity.to_int(str(merged["systemStrategy"].get("totalNetworkBandwidth") or 0))
    resource_qos = _resource_qos(qos, total_bps)
    return NodeSLO(
        resource_used_threshold_with_be=thresholds,
        cpu_burst_strategy=CPUBurstStrategy(**_fields(CPUBurstStrategy, merged["cpuBurstStrategy"])),
        resource_qos=resource_qos,
        system=_system(merged["systemStrategy"]),
        resource_qos_strategy=qos,
        system_strategy=merged["systemStrategy"],
        host_applications=tuple(_host_app(a) for a in merged.get("hostApplications") or ()),
        extensions=merged.get("extensions") or {},
        total_network_bandwidth_bps=total_bps,
        network_qos={key: resource_qos.of(key).network_qos for key in CLASS_KEYS},
        generation=generation,
    )


_RT = "resourceUsedThresholdWithBE"


def _check_merged(t: ResourceThresholdStrategy) -> None:
    """Raise :class:`InvalidNodeSLO` for rules between fields that hold only after the merge over the
    defaults (a spec may set one side and inherit the other)."""
    problems = []
    low, high = t.cpu_suppress_min_percent, t.cpu_suppress_threshold_percent
    if low is not None and low > high:
        problems.append(f"{_RT}: cpuSuppressMinPercent ({low}) above cpuSuppressThresholdPercent ({high})")
    if not 0 <= t.memory_evict_lower < t.memory_evict_threshold_percent:
        problems.append(
            f"{_RT}: memory eviction would stop at {t.memory_evict_lower}%, not in "
            f"[0, memoryEvictThresholdPercent {t.memory_evict_threshold_percent}%)"
        )
    if problems:
        raise InvalidNodeSLO(problems)
