"""UsageExporter (scrape-time families from the cache) and AdvisorMetrics (duration, lateness, errors)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from koordlet import api
from koordlet.api.metrics import NODE_PSI, POD_PSI, POD_PSI_CPU_FULL_SUPPORTED
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor.beresource import be_key
from koordlet.metricsadvisor.exporter import AdvisorMetrics, UsageExporter
from koordlet.testing import FakeClock, FakeStates, container_id, make_pod, pod_uid


def fill(cache: MetricCache, t: float, p: api.PodInfo) -> None:
    cache.append(api.NODE_CPU_USAGE, None, 1.25, t)
    cache.append(api.NODE_MEMORY_USAGE, None, 4096.0, t)
    cache.append(api.SYS_CPU_USAGE, None, 0.25, t)
    cache.append(api.POD_CPU_USAGE, {"pod_uid": p.uid}, 0.5, t)
    cache.append(api.POD_MEMORY_USAGE, {"pod_uid": p.uid}, 1024.0, t)
    cache.append(api.CONTAINER_CPU_USAGE, {"container_id": container_id(1)}, 0.375, t)
    cache.append_batch(api.NODE_BE, [(be_key("usage"), 600.0), (be_key("real-limit"), 2000.0)], t)
    cache.append(NODE_PSI, {"psi_resource": "cpu", "psi_precision": "10", "psi_degree": "some"}, 3.5, t)
    cache.append(
        POD_PSI,
        {"pod_uid": p.uid, "psi_resource": "mem", "psi_precision": "10", "psi_degree": "full"},
        1.5,
        t,
    )
    cache.append(POD_PSI_CPU_FULL_SUPPORTED, {"pod_uid": p.uid}, 1.0, t)


def test_families_and_labels(fake_clock: FakeClock) -> None:
    cache = MetricCache(clock=fake_clock)
    p = make_pod("web", uid=pod_uid(1), container_ids=[container_id(1)])
    fill(cache, fake_clock(), p)
    reg = CollectorRegistry()
    reg.register(UsageExporter(cache, FakeStates(pods=[p]), "node-a", fake_clock))
    get = reg.get_sample_value
    assert get("koordlet_node_resource_usage", {"node": "node-a", "resource": "cpu", "unit": "core"}) == 1.25
    assert get("koordlet_node_used_memory_bytes", {"node": "node-a"}) == 4096.0
    assert get("koordlet_node_used_cpu_cores", {"node": "node-a"}) == 1.25
    assert (
        get("koordlet_node_system_resource_usage", {"node": "node-a", "resource": "cpu", "unit": "core"})
        == 0.25
    )
    pod_labels = {"node": "node-a", "pod_uid": p.uid, "pod_name": "web", "pod_namespace": "default"}
    assert get("koordlet_pod_resource_usage", {**pod_labels, "resource": "memory", "unit": "byte"}) == 1024.0
    assert (
        get(
            "koordlet_container_resource_usage",
            {
                **pod_labels,
                "container_id": container_id(1),
                "container_name": "c0",
                "resource": "cpu",
                "unit": "core",
            },
        )
        == 0.375
    )
    assert (
        get(
            "koordlet_node_be_resource",
            {"node": "node-a", "resource": "cpu", "allocation": "usage", "unit": "core"},
        )
        == 0.6
    )
    assert (
        get(
            "koordlet_node_psi",
            {"node": "node-a", "psi_resource_type": "cpu", "psi_precision": "10", "psi_degree": "some"},
        )
        == 3.5
    )
    assert (
        get(
            "koordlet_pod_psi",
            {
                **pod_labels,
                "psi_resource_type": "mem",
                "psi_precision": "10",
                "psi_degree": "full",
                "cpu_full_supported": "true",
            },
        )
        == 1.5
    )
    assert get("koordlet_be_suppress_be_used_cpu_cores", {"node": "node-a"}) is None  # owned by BECPUSuppress


def test_deleted_pods_and_stale_samples_disappear(fake_clock: FakeClock) -> None:
    cache = MetricCache(clock=fake_clock)
    p = make_pod("pod-1", uid=pod_uid(1), container_ids=[container_id(1)])
    fill(cache, fake_clock(), p)
    states = FakeStates(pods=[p])
    reg = CollectorRegistry()
    reg.register(UsageExporter(cache, states, "n", fake_clock, max_age=30.0))
    labels = {
        "node": "n",
        "pod_uid": p.uid,
        "pod_name": p.name,
        "pod_namespace": "default",
        "resource": "cpu",
        "unit": "core",
    }
    assert reg.get_sample_value("koordlet_pod_resource_usage", labels) == 0.5
    states.pod_list = []
    assert reg.get_sample_value("koordlet_pod_resource_usage", labels) is None
    assert b"koordlet_container_resource_usage{" not in generate_latest(reg)
    fake_clock.advance(31.0)
    assert reg.get_sample_value("koordlet_node_used_cpu_cores", {"node": "n"}) is None


def test_be_suppress_alias_when_asked(fake_clock: FakeClock) -> None:
    cache = MetricCache(clock=fake_clock)
    fill(cache, fake_clock(), make_pod("pod-1", uid=pod_uid(1), containers=0))
    reg = CollectorRegistry()
    reg.register(UsageExporter(cache, FakeStates(), "n", fake_clock, be_suppress_alias=True))
    assert reg.get_sample_value("koordlet_be_suppress_be_used_cpu_cores", {"node": "n"}) == 0.6


def test_host_application_family(fake_clock: FakeClock) -> None:
    cache = MetricCache(clock=fake_clock)
    app = api.HostApplication(name="nginx", priority=api.PriorityClass.PROD, qos=api.QOSClass.LS)
    cache.append(api.HOST_APP_CPU_USAGE, {"host_app_name": "nginx"}, 0.2, fake_clock())
    cache.append(api.HOST_APP_CPU_USAGE, {"host_app_name": "removed"}, 9.0, fake_clock())
    reg = CollectorRegistry()
    reg.register(UsageExporter(cache, FakeStates(slo=api.NodeSLO(host_applications=(app,))), "n", fake_clock))
    assert (
        reg.get_sample_value(
            "koordlet_host_application_resource_usage",
            {
                "node": "n",
                "host_application_name": "nginx",
                "resource": "cpu",
                "priority_class": "koord-prod",
                "qos": "LS",
            },
        )
        == 0.2
    )
    assert b'host_application_name="removed"' not in generate_latest(reg)


def test_advisor_metrics_count_and_time() -> None:
    reg = CollectorRegistry()
    m = AdvisorMetrics(reg)
    m.error("PodResourceCollector", "malformed", 3)
    m.on_error("NodeResourceCollector", RuntimeError("x"))
    m.on_tick("PodResourceCollector", 0.004, 0.0)
    assert (
        reg.get_sample_value(
            "koordlet_collect_errors_total", {"collector": "PodResourceCollector", "kind": "malformed"}
        )
        == 3
    )
    assert (
        reg.get_sample_value(
            "koordlet_collect_errors_total",
            {"collector": "NodeResourceCollector", "kind": "exception:RuntimeError"},
        )
        == 1
    )
    assert (
        reg.get_sample_value("koordlet_collect_duration_seconds_count", {"collector": "PodResourceCollector"})
        == 1
    )
    assert (
        reg.get_sample_value(
            "koordlet_collect_duration_seconds_bucket", {"collector": "PodResourceCollector", "le": "0.005"}
        )
        == 1
    )
    assert (
        reg.get_sample_value("koordlet_collect_lateness_seconds_count", {"collector": "PodResourceCollector"})
        == 1
    )
