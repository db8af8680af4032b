"""Node QoS II collectors on fake trees: page cache (node, pod, container; v1 and v2), CPI with fake perf
counters (and the clean skip where perf cannot count), resctrl monitoring on a fake resctrl tree, and
their koordlet-named families on /metrics."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.api.errors import ResourceUnsupported
from koordlet.api.metrics import (
    CONTAINER_CPI,
    CONTAINER_MEMORY_USAGE_WITH_PAGE_CACHE,
    NODE_MEMORY_USAGE_WITH_PAGE_CACHE,
    POD_MEMORY_USAGE_WITH_PAGE_CACHE,
    RESCTRL_LLC,
    RESCTRL_MB,
)
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.cpi import CPICollector, CPIConfig
from koordlet.metricsadvisor.noderesource import NodeResourceCollector, NodeResourceConfig
from koordlet.metricsadvisor.podresource import PodResourceCollector, PodResourceConfig
from koordlet.metricsadvisor.qosexport import NodeQoSExporter
from koordlet.metricsadvisor.resctrlcollector import ResctrlCollector, ResctrlCollectorConfig
from koordlet.system import perf
from koordlet.testing import FakeClock, FakeStates, make_pod
from tests.support.podsweep import set_usage
from tests.support.recording import RecordingErrors
from tests.unit.koordlet.metricsadvisor.conftest import make_host
from tests.unit.koordlet.metricsadvisor.test_podresource import by_label

MON = ("cat_l3", "mba", "cqm_llc", "cqm_occup_llc", "cqm_mbm_total", "cqm_mbm_local")


def test_page_cache_series_from_the_same_reads(
    host_tree: Any, cache: MetricCache, states: FakeStates, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    pod = make_pod("p", api.QOSClass.BE)
    states.pod_list.append(pod)
    c = pod.containers[0]
    for d in (pod.cgroup_dir, c.cgroup_dir):
        host_tree.mkcgroup(None, d)
    # working set 300 + 50 + 0; page cache: 1000 active + 1000 inactive file
    set_usage(host_tree, pod.cgroup_dir, cpu_ns=0, anon=300, inactive=50, file=1000)
    set_usage(host_tree, c.cgroup_dir, cpu_ns=0, anon=100, inactive=0, file=200)
    host_tree.write_meminfo(16 << 20, 10 << 20, 4 << 20)  # KiB: total 16 GiB, available 10, free 4
    cfg = PodResourceConfig(1.0, with_page_cache=True)
    pods = PodResourceCollector(
        cfg,
        fw.Options(
            cache=cache,
            clock=fake_clock,
            errors=errors,
            host=make_host(host_tree),
            states=states,
            shared=fw.SharedState(),
        ),
    )
    pods.collect()
    assert by_label(cache, POD_MEMORY_USAGE_WITH_PAGE_CACHE, "pod_uid") == {pod.uid: 2350.0}
    assert by_label(cache, CONTAINER_MEMORY_USAGE_WITH_PAGE_CACHE, "container_id") == {c.container_id: 500.0}
    assert by_label(cache, api.POD_MEMORY_USAGE, "pod_uid") == {pod.uid: 350.0}  # koordlet's usage unchanged
    node = NodeResourceCollector(
        NodeResourceConfig(1.0, with_page_cache=True),
        fw.Options(
            cache=cache, clock=fake_clock, errors=errors, paths=host_tree.paths, shared=fw.SharedState()
        ),
    )
    node.collect()
    # koordlet: MemTotal - MemFree with page cache, MemTotal - MemAvailable without
    assert [v for _, _, v in cache.latest(NODE_MEMORY_USAGE_WITH_PAGE_CACHE)] == [12.0 * (1 << 30)]
    assert [v for _, _, v in cache.latest(api.NODE_MEMORY_USAGE)] == [6.0 * (1 << 30)]
    assert errors.kind("malformed") == 0


def test_page_cache_off_by_default(
    host_tree: Any, cache: MetricCache, states: FakeStates, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    pod = make_pod("p", api.QOSClass.BE, containers=0)
    states.pod_list.append(pod)
    host_tree.mkcgroup(None, pod.cgroup_dir)
    set_usage(host_tree, pod.cgroup_dir, cpu_ns=0, anon=300, file=1000)
    PodResourceCollector(
        PodResourceConfig(1.0),
        fw.Options(
            cache=cache,
            clock=fake_clock,
            errors=errors,
            host=make_host(host_tree),
            states=states,
            shared=fw.SharedState(),
        ),
    ).collect()
    assert cache.latest(POD_MEMORY_USAGE_WITH_PAGE_CACHE) == []


class FakeCounters:
    opened: list[FakeCounters] = []

    def __init__(self, path: Path, cpus: Sequence[int], events: Sequence[str]) -> None:
        if not path.exists():
            from koordlet.api.errors import CgroupGone

            raise CgroupGone(str(path))
        self.path, self.cpus, self.events = path, list(cpus), tuple(events)
        self.started = self.closed = False
        FakeCounters.opened.append(self)

    def start(self) -> None:
        self.started = True

    def read(self) -> perf.PerfSample:
        n = len(self.path.name)
        return perf.PerfSample(MappingProxyType({"cycles": 3000.0 * n, "instructions": 1000.0 * n}), 10, 10)

    def close(self) -> None:
        self.closed = True


def test_cpi_counts_each_running_container_over_a_window(
    fake_host: Any, cache: MetricCache, states: FakeStates, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    FakeCounters.opened = []
    fake_host.set_online_cpus(range(2))
    running = make_pod("p", api.QOSClass.LS, containers=2)
    states.pod_list.append(running)
    for c in running.containers:
        fake_host.mkcgroup(None, c.cgroup_dir)  # the second is gone by the time it would be counted
    (fake_host.paths.cgroup_root / "perf_event" / running.containers[1].cgroup_dir).rmdir()
    col = CPICollector(
        CPIConfig(60, 10),
        fw.Options(cache=cache, clock=fake_clock, errors=errors, host=make_host(fake_host), states=states),
        counters=FakeCounters,
        check=lambda: None,
    )
    assert col.interval == 10
    col.collect()  # opens and starts
    assert col.has_synced() and [o.started for o in FakeCounters.opened] == [True]
    assert FakeCounters.opened[0].cpus == [0, 1] and FakeCounters.opened[0].events == (
        "cycles",
        "instructions",
    )
    assert errors.counts == {("CPICollector", "cgroup_gone"): 1}
    fake_clock.advance(10)
    col.collect()  # reads and closes
    assert FakeCounters.opened[0].closed
    c0 = running.containers[0]
    got = {labels["cpi_resource"]: v for labels, _, v in cache.latest(CONTAINER_CPI)}
    assert got == {"cycle": 3000.0 * 64, "instruction": 1000.0 * 64}
    assert {labels["container_id"] for labels, _, _ in cache.latest(CONTAINER_CPI)} == {c0.container_id}
    fake_clock.advance(10)
    col.collect()  # 20 s after the last start: not yet (every 60 s, counting 10 s)
    assert len(FakeCounters.opened) == 1
    fake_clock.advance(30)
    col.collect()
    assert len(FakeCounters.opened) == 2
    col.close()
    assert FakeCounters.opened[1].closed


def test_cpi_skips_cleanly_where_perf_cannot_count(
    fake_host: Any,
    cache: MetricCache,
    states: FakeStates,
    fake_clock: FakeClock,
    errors: RecordingErrors,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def check() -> None:
        raise ResourceUnsupported("perf event 'cycles' is not available here: no PMU")

    col = CPICollector(
        CPIConfig(),
        fw.Options(cache=cache, clock=fake_clock, errors=errors, host=make_host(fake_host), states=states),
        check=check,
    )
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            col.collect()
    assert col.unsupported == "perf event 'cycles' is not available here: no PMU"
    assert caplog.text.count("CPI collection skipped") == 1 and col.has_synced()
    assert cache.latest(CONTAINER_CPI) == []


def _mon(root: Path, group: str, cid: int, llc: int, total: int, local: int) -> None:
    d = root / group / "mon_data" / f"mon_L3_{cid:02d}"
    d.mkdir(parents=True, exist_ok=True)
    for name, v in (("llc_occupancy", llc), ("mbm_total_bytes", total), ("mbm_local_bytes", local)):
        (d / name).write_text(f"{v}\n")


def test_resctrl_llc_and_bandwidth_per_group_and_domain(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    root = fake_host.make_resctrl(flags=MON)
    (root / "info" / "L3_MON").mkdir()
    _mon(root, "BE", 0, 1 << 20, 1000, 400)
    _mon(root, "LS", 1, 2 << 20, 0, 0)
    col = ResctrlCollector(
        ResctrlCollectorConfig(10),
        fw.Options(cache=cache, clock=fake_clock, errors=errors, paths=fake_host.paths),
    )
    col.collect()
    assert col.unsupported is None
    llc = {(lb["qos"], lb["cache_id"]): v for lb, _, v in cache.latest(RESCTRL_LLC)}
    assert llc == {("BE", "0"): float(1 << 20), ("LS", "1"): float(2 << 20)}
    assert cache.latest(RESCTRL_MB) == []  # a rate needs two readings
    fake_clock.advance(10)
    _mon(root, "BE", 0, 1 << 20, 1000 + 10 * 5000, 400 + 10 * 1000)
    col.collect()
    mb = {(lb["qos"], lb["resctrl_mb_type"]): v for lb, _, v in cache.latest(RESCTRL_MB)}
    assert mb[("BE", "mbm_total_bytes")] == 5000.0 and mb[("BE", "mbm_local_bytes")] == 1000.0
    assert mb[("LS", "mbm_total_bytes")] == 0.0


def test_resctrl_without_monitoring_logs_the_reason(
    fake_host: Any,
    cache: MetricCache,
    fake_clock: FakeClock,
    errors: RecordingErrors,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_host.write("proc/cpuinfo", "vendor_id\t: GenuineIntel\nflags\t\t: fpu\n")
    col = ResctrlCollector(
        ResctrlCollectorConfig(10),
        fw.Options(cache=cache, clock=fake_clock, errors=errors, paths=fake_host.paths),
    )
    with caplog.at_level(logging.INFO):
        col.collect()
        col.collect()
    assert "lacks cqm_llc" in str(col.unsupported)
    assert caplog.text.count("resctrl monitoring skipped") == 1


def test_exporter_families_with_koordlet_names(cache: MetricCache, fake_clock: FakeClock) -> None:
    pod = make_pod("web", api.QOSClass.LS)
    c = pod.containers[0]
    states = FakeStates(pods=[pod])
    key = (("container_id", c.container_id), ("cpi_resource", "cycle"), ("pod_uid", pod.uid))
    cache.append_batch(CONTAINER_CPI, [(key, 12345.0)], fake_clock())
    cache.append_batch(RESCTRL_LLC, [((("cache_id", "0"), ("qos", "BE")), 1024.0)], fake_clock())
    mb_key = (("cache_id", "0"), ("qos", "BE"), ("resctrl_mb_type", "mbm_total_bytes"))
    cache.append_batch(RESCTRL_MB, [(mb_key, 5e6)], fake_clock())
    registry = CollectorRegistry()
    registry.register(NodeQoSExporter(cache, states, "node-1", fake_clock, max_age=30))
    labels = {
        "node": "node-1",
        "container_id": c.container_id,
        "container_name": c.name,
        "pod_uid": pod.uid,
        "pod_name": pod.name,
        "pod_namespace": pod.namespace,
        "cpi_field": "cycles",
    }
    assert registry.get_sample_value("koordlet_container_cpi", labels) == 12345.0
    llc = {"node": "node-1", "cache_id": "0", "qos": "BE"}
    assert registry.get_sample_value("koordlet_resctrl_llc_occupancy", llc) == 1024.0
    mb = {**llc, "mb_type": "mbm_total_bytes"}
    assert registry.get_sample_value("koordlet_resctrl_memory_bandwidth", mb) == 5e6
    fake_clock.advance(31)  # stale samples are not exported
    assert registry.get_sample_value("koordlet_resctrl_llc_occupancy", llc) is None
