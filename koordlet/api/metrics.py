"""Metrics in the contract: the metric cache's kinds (every name a collector writes or a plugin queries,
with each kind's properties, :data:`PROPERTIES`), events a plugin may subscribe to, and the
:class:`MetricRegistry` it exports its own Prometheus metrics through.

Metric kinds keep Koordinator's names and units: CPU in cores, memory in bytes, ``node_be`` in
millicores. ``labels`` of a query use Koordinator's property names (``pod_uid``, ``container_id``...).
The registry's vectors have the shape of ``prometheus_client``'s (the agent hands out real ones), so a
plugin needs no Prometheus import and tests read the values back from a real registry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

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
"""Node CPU (cores) from the fast sampler (~40 ms windows; a 10 ms confirm window after a rise); short
retention, for QoS reaction only."""
BE_CPU_USAGE_FAST = "be_cpu_usage_fast"
"""CPU (cores) of the besteffort tier from the fast sampler; pairs with ``NODE_CPU_USAGE_FAST``."""

# The other kinds the agent's collectors keep (koordlet's metriccache names).
NODE_MEMORY_USAGE_WITH_PAGE_CACHE = "node_memory_usage_with_page_cache"
NODE_MEMORY_WITH_HOT_PAGE_USAGE = "node_memory_with_hot_page_usage"
NODE_MEMORY_COLD_PAGE_SIZE = "node_memory_cold_page_size"
NODE_NUMA_CPU_USAGE = "node_numa_cpu_usage"
NODE_NUMA_MEMORY_USAGE = "node_numa_memory_usage"
SYS_NUMA_CPU_USAGE = "sys_numa_cpu_usage"
SYS_NUMA_MEMORY_USAGE = "sys_numa_memory_usage"
NODE_GPU_CORE_USAGE = "node_gpu_core_usage"
NODE_GPU_MEMORY_USAGE = "node_gpu_memory_usage"
NODE_GPU_MEMORY_TOTAL = "node_gpu_memory_total"
NODE_PSI = "node_psi"
POD_MEMORY_USAGE_WITH_PAGE_CACHE = "pod_memory_usage_with_page_cache"
POD_MEMORY_WITH_HOT_PAGE_USAGE = "pod_memory_with_hot_page_usage"
POD_MEMORY_COLD_PAGE_SIZE = "pod_memory_cold_page_size"
POD_PSI = "pod_psi"
"""Pressure stall of a pod's cgroup (the Prometheus series of the same Python name in
:mod:`koordlet.metricdefs` is ``koordlet_pod_psi``, another name)."""
POD_PSI_CPU_FULL_SUPPORTED = "pod_psi_cpu_full_supported"
POD_GPU_CORE_USAGE = "pod_gpu_core_usage"
POD_GPU_MEMORY_USAGE = "pod_gpu_memory_usage"
CONTAINER_MEMORY_USAGE_WITH_PAGE_CACHE = "container_memory_usage_with_page_cache"
CONTAINER_MEMORY_WITH_HOT_PAGE_USAGE = "container_memory_with_hot_page_usage"
CONTAINER_MEMORY_COLD_PAGE_SIZE = "container_memory_cold_page_size"
CONTAINER_GPU_CORE_USAGE = "container_gpu_core_usage"
CONTAINER_GPU_MEMORY_USAGE = "container_gpu_memory_usage"
CONTAINER_CPI = "container_cpi"
CONTAINER_PSI = "container_psi"
CONTAINER_PSI_CPU_FULL_SUPPORTED = "container_psi_cpu_full_supported"
HOST_APP_MEMORY_USAGE_WITH_PAGE_CACHE = "host_application_memory_usage_with_page_cache"
HOST_APP_MEMORY_WITH_HOT_PAGE_USAGE = "host_application_memory_with_hot_page_usage"
HOST_APP_MEMORY_COLD_PAGE_SIZE = "host_application_memory_cold_page_size"
RESCTRL_LLC = "resctrl_resource_llc"
RESCTRL_MB = "resctrl_resource_mb"

_NONE: tuple[str, ...] = ()
_POD = ("pod_uid",)
_CONTAINER = ("container_id",)
_NUMA = ("numa_node_id",)
_GPU = ("gpu_minor", "gpu_device_uuid")
_HOST_APP = ("host_app_name",)
_PSI = ("psi_resource", "psi_precision", "psi_degree")

PROPERTIES: Mapping[str, tuple[str, ...]] = {
    NODE_CPU_USAGE: _NONE,
    NODE_MEMORY_USAGE: _NONE,
    NODE_MEMORY_USAGE_WITH_PAGE_CACHE: _NONE,
    NODE_MEMORY_WITH_HOT_PAGE_USAGE: _NONE,
    NODE_MEMORY_COLD_PAGE_SIZE: _NONE,
    NODE_NUMA_CPU_USAGE: _NUMA,
    NODE_NUMA_MEMORY_USAGE: _NUMA,
    SYS_NUMA_CPU_USAGE: _NUMA,
    SYS_NUMA_MEMORY_USAGE: _NUMA,
    NODE_GPU_CORE_USAGE: _GPU,
    NODE_GPU_MEMORY_USAGE: _GPU,
    NODE_GPU_MEMORY_TOTAL: _GPU,
    SYS_CPU_USAGE: _NONE,
    SYS_MEMORY_USAGE: _NONE,
    NODE_BE: ("be_resource", "be_allocation"),
    POD_CPU_USAGE: _POD,
    POD_MEMORY_USAGE: _POD,
    POD_MEMORY_USAGE_WITH_PAGE_CACHE: _POD,
    POD_CPU_THROTTLED: _POD,
    POD_MEMORY_WITH_HOT_PAGE_USAGE: _POD,
    POD_MEMORY_COLD_PAGE_SIZE: _POD,
    POD_PSI_CPU_FULL_SUPPORTED: _POD,
    POD_GPU_CORE_USAGE: ("pod_uid", *_GPU),
    POD_GPU_MEMORY_USAGE: ("pod_uid", *_GPU),
    CONTAINER_CPU_USAGE: _CONTAINER,
    CONTAINER_MEMORY_USAGE: _CONTAINER,
    CONTAINER_MEMORY_USAGE_WITH_PAGE_CACHE: _CONTAINER,
    CONTAINER_CPU_THROTTLED: _CONTAINER,
    CONTAINER_MEMORY_WITH_HOT_PAGE_USAGE: _CONTAINER,
    CONTAINER_MEMORY_COLD_PAGE_SIZE: _CONTAINER,
    CONTAINER_GPU_CORE_USAGE: ("container_id", *_GPU),
    CONTAINER_GPU_MEMORY_USAGE: ("container_id", *_GPU),
    CONTAINER_CPI: ("pod_uid", "container_id", "cpi_resource"),
    CONTAINER_PSI: ("pod_uid", "container_id", *_PSI),
    CONTAINER_PSI_CPU_FULL_SUPPORTED: ("pod_uid", "container_id"),
    POD_PSI: ("pod_uid", *_PSI),
    HOST_APP_CPU_USAGE: _HOST_APP,
    HOST_APP_MEMORY_USAGE: _HOST_APP,
    HOST_APP_MEMORY_USAGE_WITH_PAGE_CACHE: _HOST_APP,
    HOST_APP_MEMORY_WITH_HOT_PAGE_USAGE: _HOST_APP,
    HOST_APP_MEMORY_COLD_PAGE_SIZE: _HOST_APP,
    RESCTRL_LLC: ("qos", "cache_id"),
    # Koordlet's collector also sets resctrl_type=mb, which its own schema rejects; we take the schema.
    RESCTRL_MB: ("qos", "cache_id", "resctrl_mb_type"),
}
"""Each kind's properties: a sample carries exactly these labels (a query any subset of them). A kind not
listed (``node_psi``, the fast series) takes any labels."""

EVENT_NODE_SAMPLE = "node_sample"
"""Fired after each fast node-level sample, once ``NODE_CPU_USAGE_FAST`` and ``BE_CPU_USAGE_FAST`` hold
it (used for sub-second reaction to LS load; the 1 s ``NODE_CPU_USAGE`` series keeps koordlet's meaning),
while some plugin wants fast samples (``PluginContext.want_fast_samples``)."""
EVENT_PODS_CHANGED = "pods_changed"
EVENT_NODE_SLO_CHANGED = "node_slo_changed"


def system_usage(node: float, pods: float, host_apps: float) -> float:
    """What the system (neither a pod nor a host application) uses: ``node - pods - host apps``, never
    below zero (koordlet's ``getSystemUsage``; any unit, as long as the three share it)."""
    return max(node - pods - host_apps, 0.0)


class GaugeChild(Protocol):
    """One labelled series of a :class:`GaugeVec`."""

    def set(self, value: float) -> None: ...


class GaugeVec(Protocol):
    """A gauge with labels (``prometheus_client.Gauge``, Prometheus' ``GaugeVec``)."""

    def labels(self, *values: str, **by_name: str) -> GaugeChild:
        """The series of these label values, given in order or by label name."""
        ...

    def remove(self, *values: str) -> None:
        """Forget a series (a pod that is gone), so ``/metrics`` stops showing it."""
        ...


class MetricRegistry(Protocol):
    """The agent's Prometheus registry as a plugin sees it (``ctx.registry``)."""

    def gauge(self, name: str, documentation: str, labels: Sequence[str]) -> GaugeVec:
        """The gauge ``name`` on the agent's ``/metrics``; asked again with the same labels, the same one.

        Raises ``ValueError`` when ``name`` is taken by another metric or asked with other labels.
        """
        ...
