"""The typed NodeSLO (Koordinator's ``apis/slo/v1alpha1`` NodeSLO spec), after validation and merge.

Pure: stdlib only. :func:`koord.apis.nodeslo.build` makes these values from a NodeSLO's spec; the agent hands
them to QoS plugins (``koordlet.api`` re-exports them) and koord-manager renders NodeSLOs over the same
defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias, Union

from koord.apis.extension import PriorityClass, QOSClass

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

    @property
    def memory_evict_lower(self) -> int:
        """Where memory eviction stops: ``memoryEvictLowerPercent``, by default 2 points below the
        threshold (koordlet's ``defaultMemoryReleaseBufferPercent``)."""
        lower = self.memory_evict_lower_percent
        return self.memory_evict_threshold_percent - 2 if lower is None else lower


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
class NodeSLO:
    """The node's SLO policy after validation and merge over Koordinator's defaults."""

    resource_used_threshold_with_be: ResourceThresholdStrategy = field(
        default_factory=ResourceThresholdStrategy
    )
    cpu_burst_strategy: CPUBurstStrategy = field(default_factory=CPUBurstStrategy)
    resource_qos_strategy: JSONObject = field(default_factory=dict)
    """Merged ``spec.resourceQOSStrategy`` as JSON (classes ``lsrClass``, ``lsClass``, ``beClass``, ...)."""
    system_strategy: JSONObject = field(default_factory=dict)
    host_applications: tuple[HostApplication, ...] = ()
    extensions: JSONObject = field(default_factory=dict)
    total_network_bandwidth_bps: int = 0
    """``systemStrategy.totalNetworkBandwidth`` in bits per second (0: unknown)."""
    network_qos: Mapping[str, NetworkQOS] = field(default_factory=dict)
    """Each class's network QoS by its ``resourceQOSStrategy`` key (``lsClass``, ``beClass``...)."""
    generation: int = 0
    """Increments each time a new valid NodeSLO takes effect."""
