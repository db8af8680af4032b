"""``CPUEvict`` and ``CPUAllocatableEvict``, from Koordinator's ``cpu_evict.go`` formulas: the
release targets with and without lower percents, priority thresholds, victim order, one round with
``BECPUEvict`` (victims taken once, releases of one target summed) and the shared cool-down."""

from __future__ import annotations

import logging
from typing import Any, TypedDict

import pytest

from koordlet import api
from koordlet.testing import Harness, be_slo, make_harness, make_node, make_pod
from qosplugins.cpuevict import BECPUEvict

P = api.PriorityClass
OPTED_IN = {api.LABEL_EVICTION_ENABLED: "true"}


def harness(gates: dict[str, bool], node: api.NodeInfo | None = None, **slo: Any) -> Harness:
    h = make_harness(1, node=node or make_node(8000, 16 << 30), slo=be_slo(**slo))
    h.agent = api.AgentOptions(feature_gates={"BECPUEvict": False, **gates})
    return h


def started(h: Harness) -> BECPUEvict:
    plugin = BECPUEvict()
    h.start(plugin)
    h.clock.advance(20)  # past the start cool-down
    return plugin


def pod(h: Harness, name: str, used_cores: float | None, **kw: Any) -> api.PodInfo:
    kw.setdefault("labels", OPTED_IN)
    kw.setdefault("qos", api.QOSClass.LS)
    p = h.add_pod(make_pod(name, **kw))
    if used_cores is not None:
        h.metrics.set(api.POD_CPU_USAGE, used_cores, {"pod_uid": p.uid})
    return p


def node_cpu(h: Harness, cores: float, seconds: int = 1) -> None:
    now = h.clock()
    for i in range(seconds):
        h.metrics.set(api.NODE_CPU_USAGE, cores, at=now - i)


def evicted(h: Harness) -> list[str]:
    return [p.name for p, _, _ in h.evictor.evicted]


class _Usage(TypedDict):
    cpu_evict_threshold_percent: int
    evict_enabled_priority_threshold: int


USAGE: _Usage = {"cpu_evict_threshold_percent": 80, "evict_enabled_priority_threshold": 5999}


@pytest.mark.parametrize(
    ("lower", "node_cores", "victims"),
    [
        # usage% = int(6500) * 100 // 8000 = 81 >= 80; lower 78 (threshold - 2): 8000 * 3 // 100 = 240m
        (None, 6.5, ["a", "b"]),
        # lower 70: release 8000 * 11 // 100 = 880m: a (150m) + b (100m) + c (50m) + d (700m)
        (70, 6.5, ["a", "b", "c", "d"]),
        # usage% = int(6399) * 100 // 8000 = 79 < 80: nothing
        (None, 6.399, []),
    ],
)
def test_cpu_evict_releases_usage_down_to_the_lower_percent(
    lower: int | None, node_cores: float, victims: list[str]
) -> None:
    h = harness({"CPUEvict": True}, cpu_evict_lower_percent=lower, **USAGE)
    plugin = started(h)
    # priority value ties (5500, batch default) go by usage, largest first: a, b, c; d's lower value first
    # in line would change the order, so d sits later by priority: 5800 > 5500
    pod(h, "a", 0.15, priority_class=P.BATCH)
    pod(h, "b", 0.10, priority_class=P.BATCH)
    pod(h, "c", 0.05, priority_class=P.BATCH)
    pod(h, "d", 0.70, priority=5800)
    node_cpu(h, node_cores)
    plugin.reconcile()
    assert evicted(h) == victims
    reasons = {r for _, r, m in h.evictor.evicted} | {m.split(",")[0] for _, _, m in h.evictor.evicted}
    assert not victims or reasons == {"evicted", "trigger by koordlet feature CPUEvict"}


def test_cpu_evict_averages_node_usage_over_its_window() -> None:
    h = harness({"CPUEvict": True}, cpu_evict_time_window_seconds=4, **USAGE)
    plugin = started(h)
    pod(h, "a", 2.0, priority_class=P.BATCH)
    now = h.clock()
    for i, cores in enumerate([7.0, 7.0, 2.0, 2.0]):  # avg 4.5 cores: 56 % < 80 %, though last is 7
        h.metrics.set(api.NODE_CPU_USAGE, cores, at=now - i)
    plugin.reconcile()
    assert evicted(h) == []


def test_cpu_evict_victims_by_priority_then_label_then_usage() -> None:
    """Koordinator's sort: eviction-priority annotation, priority value, ``koordinator.sh/priority`` label
    (each lowest first), then usage (largest first). Not victims: over the priority threshold, not opted
    in, no usage sample, a DaemonSet pod."""
    h = harness({"CPUEvict": True}, cpu_evict_lower_percent=10, **USAGE)
    plugin = started(h)
    pod(h, "prod", 3.0, priority_class=P.PROD)  # 9500 > 5999
    pod(h, "no-label", 3.0, priority_class=P.BATCH, labels={})
    pod(h, "no-sample", None, priority_class=P.BATCH)
    pod(h, "daemon", 3.0, priority_class=P.BATCH, owner_kind="DaemonSet")
    pod(h, "busy-batch", 0.9, priority_class=P.BATCH)
    pod(h, "idle-batch", 0.1, priority_class=P.BATCH)
    pod(h, "free", 0.1, priority_class=P.FREE)  # 3500: before any batch pod
    pod(h, "batch-label-1", 0.01, priority_class=P.BATCH, labels={**OPTED_IN, "koordinator.sh/priority": "1"})
    last = {"koordinator.sh/eviction-priority": "5"}
    pod(h, "evict-me-last", 0.9, priority_class=P.FREE, annotations=last)
    node_cpu(h, 7.9)
    plugin.reconcile()
    assert evicted(h) == ["free", "batch-label-1", "busy-batch", "idle-batch", "evict-me-last"]


def test_cpu_evict_without_its_settings_warns_once_and_evicts_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = harness({"CPUEvict": True}, cpu_evict_threshold_percent=80)  # no evictEnabledPriorityThreshold
    plugin = started(h)
    pod(h, "a", 2.0, priority_class=P.BATCH)
    node_cpu(h, 7.9)
    with caplog.at_level(logging.WARNING):
        plugin.reconcile()
        plugin.reconcile()
    assert evicted(h) == []
    assert caplog.text.count("evictEnabledPriorityThreshold not set") == 1


def test_cool_down_is_shared_and_starts_at_start() -> None:
    h = harness({"CPUEvict": True}, **USAGE)
    plugin = BECPUEvict()
    h.start(plugin)
    pods = [pod(h, name, None, priority_class=P.BATCH) for name in "ab"]

    def busy_after(seconds: float) -> None:
        h.clock.advance(seconds)
        node_cpu(h, 7.9)  # release 8000 * (98 - 78) // 100 = 1600m: one 2-core pod
        for p in pods:
            h.metrics.set(api.POD_CPU_USAGE, 2.0, {"pod_uid": p.uid})
        plugin.reconcile()

    busy_after(0)
    assert evicted(h) == []  # the first 20 s
    busy_after(20)
    assert evicted(h) == ["b"]
    h.evictor.recent.clear()  # b is gone
    h.states.pod_list.pop()
    busy_after(19)
    assert evicted(h) == ["b"]  # cooling
    busy_after(1)
    assert evicted(h) == ["b", "a"]


ALLOC = {
    "cpu_allocatable_evict_threshold_percent": 110,
    "cpu_allocatable_evict_lower_percent": 100,
    "allocatable_evict_priority_threshold": 7999,
}


@pytest.mark.parametrize(
    ("batch_alloc", "victims"),
    [
        # requests 1500 + 1200 + 900 + 800 = 4400m of 3600m = 122 % > 110 %: release 4400 - 3600 = 800m,
        # the largest request first
        (3600, ["r1500"]),
        # 4400 / 4000 = 110 %: not above the threshold
        (4000, []),
        # zero allocatable: every request goes (Koordinator's IsZero)
        (0, ["r1500", "r1200", "r900", "r800"]),
        # not reported (standalone, or a Node without batch-cpu): unknown, nothing
        (api.UNKNOWN, []),
    ],
)
def test_cpu_allocatable_evict_releases_requests_down_to_the_lower_percent(
    batch_alloc: int, victims: list[str]
) -> None:
    node = make_node(8000, 16 << 30, batch_cpu_allocatable_milli=batch_alloc)
    h = harness({"CPUAllocatableEvict": True}, node=node, **ALLOC)
    plugin = started(h)
    for request in (1500, 1200, 900, 800):
        pod(h, f"r{request}", 0.1, priority_class=P.BATCH, batch_cpu_request_milli=request)
    pod(h, "prod", 0.1, priority_class=P.PROD, cpu_request_milli=4000)  # 9500: neither counted nor a victim
    plugin.reconcile()
    assert evicted(h) == victims


def test_cpu_allocatable_evict_mid_and_batch_are_separate_resources() -> None:
    node = make_node(8000, 16 << 30, batch_cpu_allocatable_milli=1000, mid_cpu_allocatable_milli=2000)
    h = harness({"CPUAllocatableEvict": True}, node=node, **ALLOC)
    plugin = started(h)
    # mid 3000m of 2000m (150 %): release 1000m of mid-cpu; batch 900m of 1000m: nothing. The free
    # (3500) and batch (5500) pods sort before the mid ones (7500) but hold no mid-cpu: passed over
    # (Koordinator evicts them first, releasing nothing toward the target)
    pod(h, "mid-a", 0.1, priority_class=P.MID, mid_cpu_request_milli=1800)
    pod(h, "mid-b", 0.1, priority_class=P.MID, mid_cpu_request_milli=1200)
    pod(h, "batch", 0.1, priority_class=P.BATCH, batch_cpu_request_milli=900)
    pod(h, "free", 0.1, priority_class=P.FREE, cpu_request_milli=500)
    plugin.reconcile()
    assert evicted(h) == ["mid-a"]


def test_one_round_be_then_allocatable_victims_once_and_releases_summed() -> None:
    """``BECPUEvict`` and ``CPUAllocatableEvict`` both release batch-cpu requests: what the BE task's victim
    released counts for the allocatable task, which takes only the remainder; and a pod the first task
    evicted is not picked again."""
    node = make_node(8000, 16 << 30, batch_cpu_allocatable_milli=2000)
    slo = {
        "cpu_evict_be_satisfaction_lower_percent": 40,
        "cpu_evict_be_satisfaction_upper_percent": 60,
        "cpu_evict_time_window_seconds": 10,
    }
    h = harness({"BECPUEvict": True, "CPUAllocatableEvict": True}, node=node, **ALLOC, **slo)
    plugin = started(h)
    # BE pods labelled BE and opted in: both tasks' candidates
    for name, request, used in (("be-a", 1500, 1.4), ("be-b", 1200, 1.1), ("be-c", 1000, 0.2)):
        pod(h, name, used, qos=api.QOSClass.BE, priority_class=P.BATCH, batch_cpu_request_milli=request)
    # BE satisfaction: limit 2000 / request 5000 = 0.4 <= 40 %: release int(5000 * 0.2) = 1000m -> be-a
    now = h.clock()
    for allocation, value in (("usage", 1900.0), ("request", 5000.0), ("real-limit", 2000.0)):
        for i in range(10):
            h.metrics.set(api.NODE_BE, value, {"be_resource": "cpu", "be_allocation": allocation}, at=now - i)
    plugin.reconcile()
    # allocatable: 3700m of 2000m: release 1700m; be-a's 1500m counts, so one more: be-b (largest request)
    assert evicted(h) == ["be-a", "be-b"]
    assert [m.split(",")[0] for _, _, m in h.evictor.evicted] == [
        "trigger by koordlet feature BECPUEvict",
        "trigger by koordlet feature CPUAllocatableEvict",
    ]


def test_only_the_gates_that_are_on_run() -> None:
    h = harness({"CPUEvict": False, "CPUAllocatableEvict": False}, **USAGE)
    plugin = started(h)
    pod(h, "a", 2.0, priority_class=P.BATCH)
    node_cpu(h, 7.9)
    plugin.reconcile()
    assert evicted(h) == []
