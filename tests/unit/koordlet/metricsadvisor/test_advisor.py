"""MetricsAdvisor: wiring, first-sample sync, GC of gone pods' series, start/stop on real threads."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor.advisor import MetricsAdvisor
from koordlet.metricsadvisor.config import AdvisorConfig
from koordlet.testing import FakeClock, FakeStates, container_id, make_pod, pod_uid
from koordshared.runtime.errors import ConfigError
from koordshared.runtime.eventbus import EventBus
from koordshared.runtime.lifecycle import Supervisor, wait_for
from tests.support.recording import FakeProcesses
from tests.unit.koordlet.metricsadvisor.conftest import make_host


def prepare(fh: Any, pods: list[api.PodInfo]) -> None:
    fh.write_proc_stat(user=100, system=50, idle=1000, per_cpu=((0,), (0,)))
    fh.write_meminfo(total_kib=1000, available_kib=400)
    fh.mkcgroup(None, "kubepods/besteffort")
    fh.write_cgroup("cpuacct.usage", "kubepods/besteffort", "0")
    fh.write_cgroup("cpuset.cpus", "kubepods/besteffort", "0-1")
    fh.write_cgroup("cpu.cfs_quota_us", "kubepods/besteffort", "-1")
    fh.write_cgroup("cpu.cfs_period_us", "kubepods/besteffort", "100000")
    for p in pods:
        d = fh.pod_cgroup(p.uid)
        fh.write_cgroup("cpuacct.usage", d, "0")
        fh.write_cgroup("cpu.stat", d, "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n")
        fh.write_memory_stat(d, active_anon=10)
        for c in p.containers:
            cd = fh.container_cgroup(p.uid, "containerd://" + c.container_id)
            fh.write_cgroup("cpuacct.usage", cd, "0")
            fh.write_cgroup("cpu.stat", cd, "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n")
            fh.write_memory_stat(cd, active_anon=5)
            fh.write_cgroup("cpuset.cpus", cd, "0-1")


def build(
    fh: Any,
    states: FakeStates,
    clock: Any,
    registry: CollectorRegistry | None,
    bus: EventBus | None = None,
    **cfg: Any,
) -> MetricsAdvisor:
    host = make_host(fh)
    cache = MetricCache(clock=clock)
    return MetricsAdvisor(
        AdvisorConfig(node_name="n", **cfg),
        host,
        cache,
        states,
        bus or EventBus(),
        registry,
        clock,
        paths=fh.paths,
        processes=FakeProcesses(),
    )


def test_two_sweeps_sync_every_collector_and_feed_the_exporter(fake_host: Any, fake_clock: FakeClock) -> None:
    pods = [
        make_pod("pod-1", uid=pod_uid(1), container_ids=[container_id(1)]),
        make_pod("pod-2", uid=pod_uid(2), container_ids=[container_id(2)]),
    ]
    prepare(fake_host, pods)
    reg = CollectorRegistry()
    adv = build(fake_host, FakeStates(pods=pods), fake_clock, reg)
    adv.collect_once()
    assert not adv.has_synced()
    fake_clock.advance(1.0)
    adv.collect_once()
    assert adv.has_synced()
    assert reg.get_sample_value("koordlet_node_used_memory_bytes", {"node": "n"}) == 600 * 1024
    assert (
        reg.get_sample_value(
            "koordlet_pod_resource_usage",
            {
                "node": "n",
                "pod_uid": pods[0].uid,
                "pod_name": "pod-1",
                "pod_namespace": "default",
                "resource": "cpu",
                "unit": "core",
            },
        )
        == 0.0
    )
    assert (
        reg.get_sample_value("koordlet_collect_duration_seconds_count", {"collector": "PodResourceCollector"})
        == 2
    )
    # node - pods - host apps, from the same sweep: 0 cores, 600 KiB - 2 x 10 bytes
    assert adv.cache.latest(api.SYS_MEMORY_USAGE)[0][2] == 600 * 1024 - 20
    adv.shutdown()
    assert adv.pods.open_fds() == 0


def test_gc_drops_series_of_pods_that_left(fake_host: Any, fake_clock: FakeClock) -> None:
    pods = [
        make_pod("pod-1", uid=pod_uid(1), container_ids=[container_id(1)]),
        make_pod("pod-2", uid=pod_uid(2), container_ids=[container_id(2)]),
    ]
    prepare(fake_host, pods)
    states = FakeStates(pods=pods)
    adv = build(fake_host, states, fake_clock, None)
    adv.collect_once()
    fake_clock.advance(1.0)
    adv.collect_once()
    assert {s["pod_uid"] for s in adv.cache.series(api.POD_MEMORY_USAGE)} == {pods[0].uid, pods[1].uid}
    states.pod_list = list(pods[:1])
    dropped = adv.gc()
    assert dropped == 3 + 3  # pod cpu/memory/throttled + container cpu/memory/throttled
    assert {s["pod_uid"] for s in adv.cache.series(api.POD_CPU_USAGE)} == {pods[0].uid}
    assert {s["container_id"] for s in adv.cache.series(api.CONTAINER_CPU_USAGE)} == {container_id(1)}
    assert adv.gc() == 0
    # PSI and host-application series go the same way
    adv.cache.append(
        "pod_psi",
        {"pod_uid": pods[1].uid, "psi_resource": "cpu", "psi_precision": "10", "psi_degree": "some"},
        1.0,
    )
    adv.cache.append(api.HOST_APP_CPU_USAGE, {"host_app_name": "retired"}, 1.0)
    assert adv.gc() == 2


def test_disabled_collectors_are_not_built(fake_host: Any, fake_clock: FakeClock) -> None:
    prepare(fake_host, [])
    adv = build(
        fake_host,
        FakeStates(),
        fake_clock,
        None,
        fast_sample_interval=0,
        psi_interval=0,
        host_app_interval=0,
        be_interval=0,
    )
    assert adv.fast is None and adv.psi is None and adv.host_apps is None and adv.be is None
    assert [c.name for c in adv.collectors] == [
        "NodeResourceCollector",
        "PodResourceCollector",
        "SystemResourceCollector",
    ]


def test_bad_config_is_refused() -> None:
    with pytest.raises(ConfigError):
        AdvisorConfig(collect_interval=0)
    with pytest.raises(ConfigError):
        AdvisorConfig(fast_sample_interval=-1)


@pytest.mark.timeout(20)
def test_start_runs_collectors_on_threads_until_stop(fake_host: Any) -> None:
    pods = [make_pod("pod-1", uid=pod_uid(1), container_ids=[container_id(1)])]
    prepare(fake_host, pods)
    reg = CollectorRegistry()
    events: list[str] = []
    adv_bus = EventBus()
    adv_bus.subscribe(api.EVENT_NODE_SAMPLE, lambda: events.append("x"))
    adv = build(
        fake_host,
        FakeStates(pods=pods),
        time.monotonic,
        reg,
        adv_bus,
        collect_interval=0.05,
        be_interval=0.05,
        fast_sample_interval=0.02,
        psi_interval=0.05,
        host_app_interval=0.05,
        gc_interval=0.05,
    )
    stop = threading.Event()
    sup = Supervisor(stop)
    try:
        adv.start(stop, sup)
        assert wait_for(adv.has_synced, stop, timeout=10.0)
        assert wait_for(lambda: len(events) >= 3, stop, timeout=5.0)
        # one thread per interval: the 0.05 s collectors share one, the fast sampler has its own
        names = {t.name for t in sup.threads}
        shared = "NodeResource+PodResource+SystemResource+BEResource+HostApplication+PSI"
        assert f"metricsadvisor/{shared}" in names
        assert "metricsadvisor/FastSampler" in names
    finally:
        stop.set()
        adv.shutdown()  # as the daemon: stop, then shutdown (wakes the sleeping threads), then join
        assert sup.join(time.monotonic() + 5.0) == []
    assert not sup.failed
    ticks = reg.get_sample_value("koordlet_collect_lateness_seconds_count", {"collector": "FastSampler"})
    assert ticks is not None and ticks >= 3
    # each sweep's CPU time too (its wall time holds waits): never more than the wall time
    cpu = reg.get_sample_value("koordlet_collect_cpu_seconds_total", {"collector": "PodResourceCollector"})
    wall = reg.get_sample_value(
        "koordlet_collect_duration_seconds_sum", {"collector": "PodResourceCollector"}
    )
    assert cpu is not None and wall is not None and 0 < cpu <= wall * 1.05 + 0.001
