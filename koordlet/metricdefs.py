"""koordlet's Prometheus metrics (``pkg/koordlet/metrics``): names, types, labels and buckets, in one table.

Every metric Koordinator's koordlet exposes is a :class:`MetricDef` here, with what fills it in this agent
(``filled_by``; empty when no feature of ours has the data). Components make their metric objects from
these definitions (:func:`counter`, :func:`gauge`, :func:`histogram`), and plugins, which see only
``koordlet.api``, use the same names and labels (a unit test holds the two together), so a Koordinator
dashboard's queries find the same series.

Koordinator's counters have no ``_total`` suffix (Go's client does not add one) while ``prometheus_client``
exposes a counter ``x`` as ``x_total``. :class:`BareCounter` adds the value under Koordinator's own name as
well (an untyped series, the same value), so ``koordlet_pod_eviction`` and
``koordlet_pod_eviction_total`` both answer.
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
"""Every koordlet metric, in the order defined above."""


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
