"""koordlet's Prometheus metrics (``pkg/koordlet/metrics``): names, types, labels and buckets, in one table.

Every metric Koordinator's koordlet exposes is a :class:`MetricDef` here, with what fills it in this agent
(``filled_by``; empty when no feature of ours has the data). Components make their metric objects from
these definitions (:func:`counter`, :func:`gauge`, :func:`histogram`), and plugins, which see only
``koordlet.api``, use the same names and labels (a unit test holds the two together), so a Koordinator
dashboard's queries find the same series. Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

NODE = "node"
POD = ("pod_uid", "pod_name", "pod_namespace")
CONTAINER = ("container_id", "container_name")
UNIT_CORE, UNIT_BYTE, UNIT_INTEGER = "core", "byte", "integer"
STATUS_SUCCEEDED, STATUS_FAILED = "succeeded", "failed"
EVICTED = "evicted"
"""The ``reason`` label of an eviction by Koordinator's eviction strategies (``EvictedStr``)."""


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Go's ``prometheus.ExponentialBuckets``."""
    return tuple(start * factor**i for i in range(count))


@dataclass(frozen=True, slots=True)
class MetricDef:
    name: str
    kind: str
    """``counter``, ``gauge`` or ``histogram``."""
    labels: tuple[str, ...]
    help: str
    filled_by: str = ""
    """The part of this agent that records it; empty: defined for completeness, nothing fills it."""
    buckets: tuple[float, ...] = ()


def _m(
    name: str, kind: str, labels: tuple[str, ...], help_: str, filled_by: str = "", **kw: object
) -> MetricDef:
    return MetricDef(f"koordlet_{name}", kind, labels, help_, filled_by, **kw)  # type: ignore[arg-type]


G, C, H = "gauge", "counter", "histogram"
START_TIME = _m("start_time", G, (NODE,), "The start time of koordlet", "agent")
COLLECT_NODE_CPU_INFO_STATUS = _m(
    "collect_node_cpu_info_status", C, (NODE, "status"), "Node CPU info collection"
)
COLLECT_NODE_NUMA_INFO_STATUS = _m(
    "collect_node_numa_info_status", C, (NODE, "status"), "Node NUMA info collection"
)
COLLECT_NODE_LOCAL_STORAGE_INFO_STATUS = _m(
    "collect_node_local_storage_info_status", C, (NODE, "status"), "Node local storage info collection"
)
POD_EVICTION = _m("pod_eviction", C, (NODE, "reason"), "Pods evicted by koordlet", "evictor")
POD_EVICTION_DETAIL = _m(
    "pod_eviction_detail", C, (NODE, "pod_namespace", "pod_name", "reason"), "Pods evicted, by pod", "evictor"
)
NODE_USED_CPU_CORES = _m(
    "node_used_cpu_cores", G, (NODE,), "Node CPU used (cores)", "metricsadvisor exporter"
)
NODE_USED_MEMORY_BYTES = _m(
    "node_used_memory_bytes", G, (NODE,), "Node memory used", "metricsadvisor exporter"
)
CONTAINER_CORE_SCHED_COOKIE = _m(
    "container_core_sched_cookie",
    G,
    (
        NODE,
        "pod_name",
        "pod_namespace",
        "pod_uid",
        "container_name",
        "container_id",
        "core_sched_group",
        "core_sched_cookie",
    ),
    "Core scheduling cookie of a container",
)
CORE_SCHED_COOKIE_MANAGE_STATUS = _m(
    "core_sched_cookie_manage_status",
    C,
    (NODE, "core_sched_group", "status"),
    "Core scheduling cookie changes",
)
CONTAINER_CPI = _m(
    "container_cpi",
    G,
    (NODE, *CONTAINER, *POD, "cpi_field"),
    "Container cycles and instructions",
    "metricsadvisor CPI collector",
)
CONTAINER_SCALED_CFS_BURST_US = _m(
    "container_scaled_cfs_burst_us",
    G,
    (NODE, "pod_namespace", "pod_name", *CONTAINER),
    "cfs burst set by CPUBurst",
    "plugin CPUBurst",
)
CONTAINER_SCALED_CFS_QUOTA_US = _m(
    "container_scaled_cfs_quota_us",
    G,
    (NODE, "pod_namespace", "pod_name", *CONTAINER),
    "cfs quota set by CPUBurst",
    "plugin CPUBurst",
)
CPUSET_SHARE_POOL_CPU_CORES = _m(
    "cpuset_share_pool_cpu_cores", G, (NODE,), "CPUs of the LS share pool", "plugin BECPUSuppress"
)
CPUSET_BE_SHARE_POOL_CPU_CORES = _m(
    "cpuset_be_share_pool_cpu_cores", G, (NODE,), "CPUs of the BE share pool", "plugin BECPUSuppress"
)
CPUSET_SHARE_POOL_INFO = _m("cpuset_share_pool_info", G, (NODE, "cpu"), "LS share pool CPUs (PerCPUMetric)")
CPUSET_BE_SHARE_POOL_INFO = _m(
    "cpuset_be_share_pool_info", G, (NODE, "cpu"), "BE share pool CPUs (PerCPUMetric)"
)
BE_SUPPRESS_CPU_CORES = _m(
    "be_suppress_cpu_cores", G, (NODE, "type"), "BE CPU allowed by suppression", "plugin BECPUSuppress"
)
BE_SUPPRESS_LS_USED_CPU_CORES = _m(
    "be_suppress_ls_used_cpu_cores", G, (NODE,), "non-BE CPU used at suppression", "plugin BECPUSuppress"
)
BE_SUPPRESS_BE_USED_CPU_CORES = _m(
    "be_suppress_be_used_cpu_cores", G, (NODE,), "BE CPU used at suppression", "plugin BECPUSuppress"
)
HOST_APPLICATION_RESOURCE_USAGE = _m(
    "host_application_resource_usage",
    G,
    (NODE, "host_application_name", "resource", "priority_class", "qos"),
    "Host application resource usage",
    "metricsadvisor exporter",
)
KUBELET_REQUEST_DURATION_SECONDS = _m(
    "kubelet_request_duration_seconds",
    H,
    ("verb", "path", "code"),
    "Kubelet HTTP request duration",
    buckets=exponential_buckets(0.001, 4, 7),
)
NODE_METRIC_NODE_USAGE = _m(
    "node_metric_node_usage",
    G,
    (NODE, "resource", "unit"),
    "NodeMetric nodeUsage (NodeMetricPromMetrics)",
    "statesinformer NodeMetric report",
)
NODE_METRIC_SYSTEM_USAGE = _m(
    "node_metric_system_usage",
    G,
    (NODE, "resource", "unit"),
    "NodeMetric systemUsage (NodeMetricPromMetrics)",
    "statesinformer NodeMetric report",
)
NODE_METRIC_NUMA_NODE_USAGE = _m(
    "node_metric_numa_node_usage",
    G,
    (NODE, "numa_node_id", "resource", "unit"),
    "NodeMetric NUMA nodeUsage",
    "statesinformer NodeMetric report",
)
NODE_METRIC_NUMA_SYSTEM_USAGE = _m(
    "node_metric_numa_system_usage",
    G,
    (NODE, "numa_node_id", "resource", "unit"),
    "NodeMetric NUMA systemUsage",
    "statesinformer NodeMetric report",
)
CONTAINER_OOM_SCORE_ADJ = _m(
    "container_oom_score_adj",
    G,
    (NODE, "pod_name", "pod_namespace", "pod_uid", "container_name"),
    "oom_score_adj of a container (OOMScoreAdj)",
)
NODE_PREDICTED_RESOURCE_RECLAIMABLE = _m(
    "node_predicted_resource_reclaimable",
    G,
    (NODE, "predictor", "resource", "unit"),
    "Reclaimable resource predicted",
    "prediction",
)
NODE_PREDICTED_RESOURCE_PEAK = _m(
    "node_predicted_resource_peak",
    G,
    (NODE, "predictor", "resource", "unit"),
    "Peak resource predicted",
    "prediction",
)
CONTAINER_PSI = _m(
    "container_psi",
    G,
    (NODE, *CONTAINER, *POD, "psi_resource_type", "psi_precision", "psi_degree", "cpu_full_supported"),
    "Container pressure stall",
    "metricsadvisor exporter",
)
POD_PSI = _m(
    "pod_psi",
    G,
    (NODE, *POD, "psi_resource_type", "psi_precision", "psi_degree", "cpu_full_supported"),
    "Pod pressure stall",
    "metricsadvisor exporter",
)
RESCTRL_LLC_OCCUPANCY = _m(
    "resctrl_llc_occupancy",
    G,
    (NODE, "cache_id", "qos"),
    "LLC occupancy by QoS group",
    "metricsadvisor resctrl collector",
)
RESCTRL_MEMORY_BANDWIDTH = _m(
    "resctrl_memory_bandwidth",
    G,
    (NODE, "cache_id", "qos", "mb_type"),
    "Memory bandwidth by QoS group",
    "metricsadvisor resctrl collector",
)
RESOURCE_UPDATE_DURATION_MILLISECONDS = _m(
    "resource_update_duration_milliseconds",
    H,
    ("type", "status"),
    "Resource update duration",
    "resourceexecutor",
    buckets=exponential_buckets(0.01, 4, 8),
)
NODE_RESOURCE_ALLOCATABLE = _m(
    "node_resource_allocatable",
    G,
    (NODE, "resource", "unit"),
    "Node allocatable of batch resources",
    "metricsadvisor exporter",
)
NODE_PRIORITY_RESOURCE_RECLAIMABLE = _m(
    "node_priority_resource_reclaimable",
    G,
    (NODE, "priority", "resource", "unit"),
    "Reclaimable resource of a priority class",
    "statesinformer NodeMetric report",
)
NODE_RESOURCE_PRIORITY_RECLAIMABLE_STATUS = _m(
    "node_resource_priority_reclaimable_status",
    G,
    (NODE, "priority"),
    "0 when the reclaimable prediction succeeded, 1 when it failed",
    "statesinformer NodeMetric report",
)
CONTAINER_RESOURCE_REQUESTS = _m(
    "container_resource_requests",
    G,
    (NODE, "resource", "unit", *POD, *CONTAINER),
    "Container requests of batch resources",
    "metricsadvisor exporter",
)
CONTAINER_RESOURCE_LIMITS = _m(
    "container_resource_limits",
    G,
    (NODE, "resource", "unit", *POD, *CONTAINER),
    "Container limits of batch resources",
    "metricsadvisor exporter",
)
RUNTIME_HOOK_INVOKED_DURATION_MILLISECONDS = _m(
    "runtime_hook_invoked_duration_milliseconds",
    H,
    (NODE, "hook", "stage", "status"),
    "Runtime hook duration",
    "runtimehooks",
    buckets=exponential_buckets(0.01, 4, 8),
)
RUNTIME_HOOK_RECONCILER_INVOKED_DURATION_MILLISECONDS = _m(
    "runtime_hook_reconciler_invoked_duration_milliseconds",
    H,
    (NODE, "level", "resource_type", "status"),
    "Runtime hook reconciler duration",
    "runtimehooks",
    buckets=exponential_buckets(0.01, 4, 8),
)

KOORDLET_METRICS: tuple[MetricDef, ...] = tuple(
    v for v in list(globals().values()) if isinstance(v, MetricDef)
)
"""Every metric of Koordinator's koordlet, in the order defined above."""


def _a(name: str, kind: str, labels: tuple[str, ...], help_: str, filled_by: str) -> MetricDef:
    return MetricDef(f"koordlet_{name}", kind, labels, help_, filled_by)


# ---- the agent's own metrics (this re-implementation's, not Koordinator's) ---------------------------------

BUILD_INFO = _a(
    "build_info", G, ("version", "python", "native"), "Build information of the running agent", "agent"
)
PLUGIN_STATE = _a(
    "plugin_state", G, ("plugin", "source", "state"), "QoS plugin state (1 for the current state)", "agent"
)
TICK_ERRORS = _a(
    "tick_errors",
    C,
    ("component", "kind"),
    "Periodic ticks that raised, by component (plugins are named plugin/<name>)",
    "agent",
)
TICK_DURATION_SECONDS = _a("tick_duration_seconds", H, ("component",), "Run time of periodic ticks", "agent")
TICK_LATENESS_SECONDS = _a(
    "tick_lateness_seconds",
    H,
    ("component",),
    "How late a periodic tick started compared to its schedule",
    "agent",
)
COLLECT_DURATION_SECONDS = _a(
    "collect_duration_seconds", H, ("collector",), "Run time of one collector sweep", "metricsadvisor"
)
COLLECT_CPU_SECONDS = _a(
    "collect_cpu_seconds",
    C,
    ("collector",),
    "CPU time of the collector's sweeps (its thread's clock: user and kernel time, no waits)",
    "metricsadvisor",
)
COLLECT_LATENESS_SECONDS = _a(
    "collect_lateness_seconds",
    H,
    ("collector",),
    "How late a collector sweep started compared to its schedule",
    "metricsadvisor",
)
COLLECT_ERRORS = _a(
    "collect_errors",
    C,
    ("collector", "kind"),
    "Collection problems by collector and kind (cgroup_gone, malformed, counter_reset, ...)",
    "metricsadvisor",
)
POD_RESOURCE_USAGE = _a(
    "pod_resource_usage", G, (NODE, *POD, "resource", "unit"), "Pod resource usage", "metricsadvisor"
)
CONTAINER_RESOURCE_USAGE = _a(
    "container_resource_usage",
    G,
    (NODE, *CONTAINER, *POD, "resource", "unit"),
    "Container resource usage",
    "metricsadvisor",
)
NODE_RESOURCE_USAGE = _a(
    "node_resource_usage", G, ("node", "resource", "unit"), "Node resource usage", "metricsadvisor"
)
NODE_SYSTEM_RESOURCE_USAGE = _a(
    "node_system_resource_usage",
    G,
    ("node", "resource", "unit"),
    "Node usage outside pods and host applications",
    "metricsadvisor",
)
NODE_BE_RESOURCE = _a(
    "node_be_resource",
    G,
    ("node", "resource", "allocation", "unit"),
    "BE CPU: usage, real limit and batch request (cores)",
    "metricsadvisor",
)
NODE_PSI = _a(
    "node_psi",
    G,
    (NODE, "psi_resource_type", "psi_precision", "psi_degree"),
    "Node pressure stall (percent)",
    "metricsadvisor",
)
METRIC_CACHE_SERIES = _a(
    "metric_cache_series", G, ("metric",), "Time series held by the metric cache.", "metriccache"
)
METRIC_CACHE_SAMPLES = _a("metric_cache_samples", G, (), "Samples held by the metric cache.", "metriccache")
METRIC_CACHE_PRIVATE_SERIES = _a(
    "metric_cache_private_series",
    G,
    (),
    "Series of the metric cache off their kind's shared timeline.",
    "metriccache",
)
METRIC_CACHE_CHECKPOINT_DURATION_SECONDS = _a(
    "metric_cache_checkpoint_duration_seconds",
    G,
    (),
    "Duration of the last metric cache checkpoint.",
    "metriccache",
)
METRIC_CACHE_CHECKPOINT_BYTES = _a(
    "metric_cache_checkpoint_bytes", G, (), "Size of the last metric cache checkpoint file.", "metriccache"
)
METRIC_CACHE_CHECKPOINTS = _a("metric_cache_checkpoints", C, (), "Checkpoints written.", "metriccache")
METRIC_CACHE_CHECKPOINT_ERRORS = _a(
    "metric_cache_checkpoint_errors", C, (), "Checkpoints that failed.", "metriccache"
)
METRIC_CACHE_LOAD_ERRORS = _a(
    "metric_cache_load_errors",
    C,
    (),
    "Checkpoints that could not be loaded (corrupt, truncated, other version).",
    "metriccache",
)
METRIC_CACHE_TRIMMED_SAMPLES = _a(
    "metric_cache_trimmed_samples",
    C,
    (),
    "Samples left out of checkpoints to stay under --tsdb-max-bytes.",
    "metriccache",
)
POD_EVICTION_REFUSED = _a(
    "pod_eviction_refused", C, ("node",), "Evictions refused by the agent's safety rules", "evictor"
)
RESOURCE_UPDATE_ERRORS = _a(
    "resource_update_errors",
    C,
    ("type", "kind"),
    "Updates not applied, by resource type and kind (gone, invalid, unsupported, unsafe, errno name)",
    "resourceexecutor",
)
NODESLO_INVALID_TOTAL = _a(
    "nodeslo_invalid_total", C, (), "NodeSLO specs refused by validation (last good kept)", "statesinformer"
)
PODS_REFRESH_TOTAL = _a(
    "pods_refresh_total", C, ("result",), "Pod list refreshes by result", "statesinformer"
)
NODEMETRIC_REPORT_TOTAL = _a(
    "nodemetric_report_total", C, ("result",), "NodeMetric status reports by result", "statesinformer"
)
STATES_INFORMER_DEGRADED = _a(
    "states_informer_degraded",
    G,
    (),
    "1 while the pod list is older than the allowed staleness",
    "statesinformer",
)
STATES_INFORMER_PODS = _a("states_informer_pods", G, (), "Pods in the informer's snapshot", "statesinformer")

AGENT_METRICS: tuple[MetricDef, ...] = (
    BUILD_INFO,
    PLUGIN_STATE,
    TICK_ERRORS,
    TICK_DURATION_SECONDS,
    TICK_LATENESS_SECONDS,
    COLLECT_DURATION_SECONDS,
    COLLECT_CPU_SECONDS,
    COLLECT_LATENESS_SECONDS,
    COLLECT_ERRORS,
    POD_RESOURCE_USAGE,
    CONTAINER_RESOURCE_USAGE,
    NODE_RESOURCE_USAGE,
    NODE_SYSTEM_RESOURCE_USAGE,
    NODE_BE_RESOURCE,
    NODE_PSI,
    METRIC_CACHE_SERIES,
    METRIC_CACHE_SAMPLES,
    METRIC_CACHE_PRIVATE_SERIES,
    METRIC_CACHE_CHECKPOINT_DURATION_SECONDS,
    METRIC_CACHE_CHECKPOINT_BYTES,
    METRIC_CACHE_CHECKPOINTS,
    METRIC_CACHE_CHECKPOINT_ERRORS,
    METRIC_CACHE_LOAD_ERRORS,
    METRIC_CACHE_TRIMMED_SAMPLES,
    POD_EVICTION_REFUSED,
    RESOURCE_UPDATE_ERRORS,
    NODESLO_INVALID_TOTAL,
    PODS_REFRESH_TOTAL,
    NODEMETRIC_REPORT_TOTAL,
    STATES_INFORMER_DEGRADED,
    STATES_INFORMER_PODS,
)
"""The agent's own metrics; :data:`KOORDLET_METRICS` are Koordinator's."""


def counter(d: MetricDef, registry: CollectorRegistry) -> Counter:
    """``d`` as a counter, plus Koordinator's bare name (:class:`BareCounter`) on the same registry."""
    made = Counter(d.name, d.help, list(d.labels), registry=registry)
    registry.register(BareCounter(d.name, d.help, made))
    return made


def gauge(d: MetricDef, registry: CollectorRegistry) -> Gauge:
    return Gauge(d.name, d.help, list(d.labels), registry=registry)


def histogram(d: MetricDef, registry: CollectorRegistry) -> Histogram:
    return Histogram(d.name, d.help, list(d.labels), buckets=d.buckets, registry=registry)


class BareCounter(Collector):
    """The samples of ``counter`` under ``name`` itself (untyped), as Koordinator's Go client names them."""

    def __init__(self, name: str, documentation: str, counter: Counter) -> None:
        self.name = name
        self.documentation = documentation
        self.counter = counter

    def describe(self) -> list[Metric]:
        return []  # the counter already holds the name in the registry; nothing else to reserve

    def collect(self) -> Iterator[Metric]:
        family = Metric(self.name, f"{self.documentation} (Koordinator's name)", "unknown")
        for metric in self.counter.collect():
            for s in metric.samples:
                if s.name.endswith("_total"):
                    family.add_sample(self.name, s.labels, s.value)
        yield family
