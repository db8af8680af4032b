"""koordlet's metric table against Koordinator's ``pkg/koordlet/metrics``, and the
series the agent's components expose under those names."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from koordlet import api, metricdefs
from koordlet.metricsadvisor.summary import ResourceSummaryExporter
from koordlet.testing import FakeStates, be_slo, make_harness, make_node, make_pod, topology
from qosplugins.cpuburst import CPUBurst
from qosplugins.cpusuppress import BECPUSuppress

N, P, C = ("node",), ("pod_uid", "pod_name", "pod_namespace"), ("container_id", "container_name")
KOORDINATOR = {
    # name: (type, labels); written from Koordinator's metric files (common, cpi, cpu_burst, cpu_cpuset,
    # cpu_suppress, host_application, kubelet, node_metric, oom_score_adj, prediction, psi, resctrl,
    # resource_executor, resource_summary, runtime_hook, core_sched)
    "start_time": ("gauge", N),
    "collect_node_cpu_info_status": ("counter", (*N, "status")),
    "collect_node_numa_info_status": ("counter", (*N, "status")),
    "collect_node_local_storage_info_status": ("counter", (*N, "status")),
    "pod_eviction": ("counter", (*N, "reason")),
    "pod_eviction_detail": ("counter", (*N, "pod_namespace", "pod_name", "reason")),
    "node_used_cpu_cores": ("gauge", N),
    "node_used_memory_bytes": ("gauge", N),
    "container_core_sched_cookie": (
        "gauge",
        (
            *N,
            "pod_name",
            "pod_namespace",
            "pod_uid",
            "container_name",
            "container_id",
            "core_sched_group",
            "core_sched_cookie",
        ),
    ),
    "core_sched_cookie_manage_status": ("counter", (*N, "core_sched_group", "status")),
    "container_cpi": ("gauge", (*N, *C, *P, "cpi_field")),
    "container_scaled_cfs_burst_us": ("gauge", (*N, "pod_namespace", "pod_name", *C)),
    "container_scaled_cfs_quota_us": ("gauge", (*N, "pod_namespace", "pod_name", *C)),
    "cpuset_share_pool_cpu_cores": ("gauge", N),
    "cpuset_be_share_pool_cpu_cores": ("gauge", N),
    "cpuset_share_pool_info": ("gauge", (*N, "cpu")),
    "cpuset_be_share_pool_info": ("gauge", (*N, "cpu")),
    "be_suppress_cpu_cores": ("gauge", (*N, "type")),
    "be_suppress_ls_used_cpu_cores": ("gauge", N),
    "be_suppress_be_used_cpu_cores": ("gauge", N),
    "host_application_resource_usage": (
        "gauge",
        (*N, "host_application_name", "resource", "priority_class", "qos"),
    ),
    "kubelet_request_duration_seconds": ("histogram", ("verb", "path", "code")),
    "node_metric_node_usage": ("gauge", (*N, "resource", "unit")),
    "node_metric_system_usage": ("gauge", (*N, "resource", "unit")),
    "node_metric_numa_node_usage": ("gauge", (*N, "numa_node_id", "resource", "unit")),
    "node_metric_numa_system_usage": ("gauge", (*N, "numa_node_id", "resource", "unit")),
    "container_oom_score_adj": ("gauge", (*N, "pod_name", "pod_namespace", "pod_uid", "container_name")),
    "node_predicted_resource_reclaimable": ("gauge", (*N, "predictor", "resource", "unit")),
    "node_predicted_resource_peak": ("gauge", (*N, "predictor", "resource", "unit")),
    "container_psi": (
        "gauge",
        (*N, *C, *P, "psi_resource_type", "psi_precision", "psi_degree", "cpu_full_supported"),
    ),
    "pod_psi": ("gauge", (*N, *P, "psi_resource_type", "psi_precision", "psi_degree", "cpu_full_supported")),
    "resctrl_llc_occupancy": ("gauge", (*N, "cache_id", "qos")),
    "resctrl_memory_bandwidth": ("gauge", (*N, "cache_id", "qos", "mb_type")),
    "resource_update_duration_milliseconds": ("histogram", ("type", "status")),
    "node_resource_allocatable": ("gauge", (*N, "resource", "unit")),
    "node_priority_resource_reclaimable": ("gauge", (*N, "priority", "resource", "unit")),
    "node_resource_priority_reclaimable_status": ("gauge", (*N, "priority")),
    "container_resource_requests": ("gauge", (*N, "resource", "unit", *P, *C)),
    "container_resource_limits": ("gauge", (*N, "resource", "unit", *P, *C)),
    "runtime_hook_invoked_duration_milliseconds": ("histogram", (*N, "hook", "stage", "status")),
    "runtime_hook_reconciler_invoked_duration_milliseconds": (
        "histogram",
        (*N, "level", "resource_type", "status"),
    ),
}


def test_every_koordlet_metric_with_its_type_and_labels() -> None:
    table = {d.name.removeprefix("koordlet_"): (d.kind, d.labels) for d in metricdefs.KOORDLET_METRICS}
    assert table == KOORDINATOR
    assert len(table) == 41


def test_histogram_buckets_are_koordinators() -> None:
    # prometheus.ExponentialBuckets(0.001, 4, 7) and (0.01, 4, 8)
    assert metricdefs.KUBELET_REQUEST_DURATION_SECONDS.buckets == (
        0.001,
        0.004,
        0.016,
        0.064,
        0.256,
        1.024,
        4.096,
    )
    ms = (0.01, 0.04, 0.16, 0.64, 2.56, 10.24, 40.96, 163.84)
    for d in (
        metricdefs.RESOURCE_UPDATE_DURATION_MILLISECONDS,
        metricdefs.RUNTIME_HOOK_INVOKED_DURATION_MILLISECONDS,
        metricdefs.RUNTIME_HOOK_RECONCILER_INVOKED_DURATION_MILLISECONDS,
    ):
        assert [round(b, 6) for b in d.buckets] == list(ms), d.name


def families(registry: CollectorRegistry) -> dict[str, tuple[str, set[tuple[tuple[str, str], ...]]]]:
    text = generate_latest(registry).decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        out[fam.name] = (
            fam.type,
            {
                tuple(sorted(s.labels.items()))
                for s in fam.samples
                if s.name == fam.name or s.name == fam.name + "_total"
            },
        )
    return out


def test_counters_answer_to_koordinators_bare_names_too() -> None:
    registry = CollectorRegistry()
    count = metricdefs.counter(metricdefs.POD_EVICTION, registry)
    count.labels(node="n1", reason=metricdefs.EVICTED).inc(2)
    assert registry.get_sample_value("koordlet_pod_eviction_total", {"node": "n1", "reason": "evicted"}) == 2
    assert registry.get_sample_value("koordlet_pod_eviction", {"node": "n1", "reason": "evicted"}) == 2
    fams = families(registry)  # the text format parses: one TYPE per name
    assert fams["koordlet_pod_eviction"][0] in ("unknown", "untyped")


def test_plugins_make_their_koordlet_metrics_with_koordinators_labels() -> None:
    h = make_harness(1, topology(cores=4), slo=be_slo())
    h.start(BECPUSuppress())
    h.start(CPUBurst())
    defs = {d.name: d for d in metricdefs.KOORDLET_METRICS}
    made = {name: labels for name, (labels, _) in h.plugin_metrics._gauges.items()}
    assert made, "the plugins made no gauges"
    for name, labels in made.items():
        assert name in defs and labels == defs[name].labels, name


def test_resource_summary_of_batch_resources() -> None:
    pod = make_pod("batch", api.QOSClass.BE, batch_cpu_request_milli=2000)
    states = FakeStates(make_node(8000, 16 << 30, batch_cpu_allocatable_milli=3000), (pod,), None)
    registry = CollectorRegistry()
    registry.register(ResourceSummaryExporter(states, "n1"))
    get = registry.get_sample_value
    assert (
        get(
            "koordlet_node_resource_allocatable",
            {"node": "n1", "resource": "kubernetes.io/batch-cpu", "unit": "integer"},
        )
        == 3000
    )
    c = pod.containers[0]
    labels = {
        "node": "n1",
        "resource": "kubernetes.io/batch-cpu",
        "unit": "integer",
        "pod_uid": pod.uid,
        "pod_name": "batch",
        "pod_namespace": "default",
        "container_id": c.container_id,
        "container_name": c.name,
    }
    assert get("koordlet_container_resource_requests", labels) == 2000
    states.node_info = make_node(8000, 16 << 30, batch_cpu_allocatable_milli=-1)  # not reported: no series
    assert (
        get(
            "koordlet_node_resource_allocatable",
            {"node": "n1", "resource": "kubernetes.io/batch-cpu", "unit": "integer"},
        )
        is None
    )
