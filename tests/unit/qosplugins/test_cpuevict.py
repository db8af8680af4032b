"""BECPUEvict: satisfaction window, last-vs-average rule, victim order, start and post-eviction cool-down."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import pytest

from koordlet import api
from koordlet.statesinformer.node import local_node
from koordlet.system.paths import HostPaths
from koordlet.testing import Harness, be_slo, make_harness, make_node, make_pod
from qosplugins.cpuevict import BECPUEvict

SLO = {
    "cpu_evict_be_satisfaction_lower_percent": 40,
    "cpu_evict_be_satisfaction_upper_percent": 60,
    "cpu_evict_time_window_seconds": 10,
}


def harness(version: int = 1, **extra: Any) -> Harness:
    return make_harness(
        version, node=make_node(8000, 1 << 30, batch_cpu_allocatable_milli=2000), slo=be_slo(**SLO | extra)
    )


def be_series(
    h: Harness, usage: Sequence[float], request: Sequence[float], limit: Sequence[float] | None
) -> None:
    """One sample a second ending now, for node_be usage/request/real-limit (millicores)."""
    now = h.clock()
    n = len(usage)
    series: dict[str, Sequence[float]] = {"usage": usage, "request": request}
    if limit is not None:
        series["real-limit"] = limit
    for allocation, values in series.items():
        for i, v in enumerate(values):
            labels = {"be_resource": "cpu", "be_allocation": allocation}
            h.metrics.set(api.NODE_BE, v, labels, at=now - (n - 1 - i))


def be_pod(h: Harness, name: str, batch_request: int, used_cores: float, **kw: object) -> api.PodInfo:
    pod = h.add_pod(make_pod(name, batch_cpu_request_milli=batch_request, **kw))  # type: ignore[arg-type]
    h.metrics.set(api.POD_CPU_USAGE, used_cores, {"pod_uid": pod.uid})
    return pod


def started(h: Harness) -> BECPUEvict:
    plugin = BECPUEvict()
    h.start(plugin)
    return plugin


def names(h: Harness) -> list[str]:
    return [p.name for p, _, _ in h.evictor.evicted]


def test_no_cpu_eviction_in_the_first_20_seconds() -> None:
    h = harness()
    plugin = started(h)
    be_pod(h, "a", 1500, 1.2)
    be_series(h, [1800] * 10, [5000] * 10, [2000] * 10)
    plugin.reconcile()
    assert h.evictor.evicted == []
    h.clock.advance(20)
    be_series(h, [1800] * 10, [5000] * 10, [2000] * 10)
    plugin.reconcile()
    assert names(h) == ["a"]


@pytest.mark.parametrize("version", [1, 2])
def test_release_from_satisfaction_and_victim_order(version: int) -> None:
    h = harness(version)
    plugin = started(h)
    h.clock.advance(20)
    be_pod(h, "calm", 800, 0.4)  # 400m / 800m = 0.5
    be_pod(h, "busy", 1500, 1.2)  # 1200m / 1500m = 0.8
    ls = h.add_pod(make_pod("ls", api.QOSClass.LS))  # not BE: never a victim, however busy
    h.metrics.set(api.POD_CPU_USAGE, 3.0, {"pod_uid": ls.uid})
    be_series(h, [1800] * 10, [5000] * 10, [2000] * 10)
    plugin.reconcile()
    # usage/limit = 1800/2000 = 90% >= 90%; satisfaction = 2000/5000 = 0.40 <= 0.40
    # release = 5000 * (0.60 - 0.40) = 1000m; "busy" (ratio 0.8) first releases 1500m -> done
    assert names(h) == ["busy"]
    # Koordinator's reason label is "evicted"; the strategy is in the message
    assert h.evictor.evicted[0][1:] == ("evicted", "trigger by koordlet feature BECPUEvict, kill pod: busy")
    h.clock.advance(5)
    be_series(h, [1800] * 10, [5000] * 10, [2000] * 10)
    plugin.reconcile()
    assert names(h) == ["busy"]  # 20 s cool-down after an eviction


def test_last_reading_differs_takes_the_smaller_release() -> None:
    h = harness()
    plugin = started(h)
    h.clock.advance(20)
    be_pod(h, "first", 1050, 1.0)  # ratio 0.95
    be_pod(h, "second", 100, 0.05)  # ratio 0.5
    be_pod(h, "third", 100, 0.01)  # ratio 0.1
    be_series(h, [1800] * 10, [5000] * 10, [2000] * 9 + [1000])
    plugin.reconcile()
    # avg limit = (9*2000 + 1000)/10 = 1900: 1800/1900 >= 90%, satisfaction 0.38 -> 5000*(0.60-0.38) = 1100
    # last limit 1000 differs: 1800/1000 >= 90%, satisfaction 0.20 -> 2000; min(1100, 2000) = 1100
    # first (1050) < 1100, second brings 1150 -> stop
    assert names(h) == ["first", "second"]


def test_satisfied_or_idle_be_is_left_alone() -> None:
    h = harness()
    plugin = started(h)
    h.clock.advance(20)
    be_pod(h, "a", 1500, 1.2)
    be_series(h, [1800] * 10, [5000] * 10, [2100] * 10)  # satisfaction 0.42 > 0.40
    plugin.reconcile()
    h.clock.advance(1)
    be_series(h, [1700] * 10, [5000] * 10, [2000] * 10)  # usage 85% < 90%
    plugin.reconcile()
    assert h.evictor.evicted == []


def test_short_history_is_not_a_trend() -> None:
    h = harness()
    plugin = started(h)
    h.clock.advance(20)
    be_pod(h, "a", 1500, 1.2)
    be_series(h, [1800] * 2, [5000] * 2, [2000] * 2)  # 2 samples * 1 s < 10 // 3 = 3
    plugin.reconcile()
    assert h.evictor.evicted == []


def test_a_third_of_the_window_in_integer_seconds_is_enough() -> None:
    """Koordinator's check is ``count * interval < window / 3`` on int64, so 3 samples
    of a 10 s window (10 / 3 = 3) are enough; 3 < 3.33 in floats asked for a fourth."""
    h = harness()
    plugin = started(h)
    h.clock.advance(20)
    be_pod(h, "a", 1500, 1.2)
    be_series(h, [1800] * 3, [5000] * 3, [2000] * 3)
    plugin.reconcile()
    assert names(h) == ["a"]


def test_unlabelled_besteffort_pod_is_not_a_candidate() -> None:
    """Only pods labelled BE; the unlabelled BestEffort pod (the busiest) stays."""
    h = harness()
    plugin = started(h)
    h.clock.advance(20)
    plain = h.add_pod(make_pod("plain", kube_qos=api.KubeQOSClass.BESTEFFORT, batch_cpu_request_milli=1500))
    h.metrics.set(api.POD_CPU_USAGE, 1.4, {"pod_uid": plain.uid})
    be_pod(h, "labelled", 1500, 0.3)
    be_series(h, [1800] * 10, [5000] * 10, [2000] * 10)
    plugin.reconcile()
    assert names(h) == ["labelled"]


def test_high_average_but_idle_now_evicts_nothing() -> None:
    """The average (1800m of a 2000m limit, 90 %) says busy, the last sample (500m,
    25 %) says not: Koordinator returns before evicting when the current usage is not high enough."""
    h = harness()
    plugin = started(h)
    h.clock.advance(20)
    for i in range(3):
        be_pod(h, f"be-{i}", 400, 0.4)
    be_series(h, [1950] * 9 + [500], [5000] * 10, [2000] * 10)
    # avg usage = (9 * 1950 + 500) / 10 = 1805 >= 90 % of 2000; last 500 / 2000 = 25 % < 90 %
    plugin.reconcile()
    assert h.evictor.evicted == []
    h.clock.advance(1)
    be_series(h, [1950] * 10, [5000] * 10, [2000] * 10)  # busy now as well: release 1000m
    plugin.reconcile()
    assert len(names(h)) == 3  # three 400m pods: 800m < 1000m after two, the third completes it


def test_sidecars_count_in_the_victims_batch_request() -> None:
    """A restartable init container's batch-cpu is part of what the pod releases and
    of its usage ratio (Koordinator sums sidecars since its eviction fix)."""
    h = harness()
    plugin = started(h)
    h.clock.advance(20)
    sidecar = api.ContainerInfo(name="proxy", container_id="", batch_cpu_request_milli=600)
    a = make_pod("with-sidecar", batch_cpu_request_milli=500)
    h.add_pod(dataclasses.replace(a, sidecars=(sidecar,)))
    h.metrics.set(api.POD_CPU_USAGE, 0.55, {"pod_uid": a.uid})  # 550 / 1100 = 0.5 (not 550 / 500 = 1.1)
    be_pod(h, "plain", 1000, 0.7)  # 0.7: before the sidecar pod
    be_pod(h, "tail", 1000, 0.1)  # 0.1: last
    be_series(h, [1800] * 10, [5000] * 10, [1500] * 10)  # satisfaction 0.3: release 5000 * 0.3 = 1500m
    plugin.reconcile()
    # plain (1000m) + with-sidecar (500m + 600m) = 2100m >= 1500m; without the sidecar the order would be
    # with-sidecar (1.1), plain (0.7) and its 500m + 1000m the same 1500m, so the order is what shows it.
    assert names(h) == ["plain", "with-sidecar"]


def test_evict_by_allocatable_uses_node_batch_allocatable() -> None:
    h = harness(cpu_evict_policy="evictByAllocatable")
    plugin = started(h)
    h.clock.advance(20)
    be_pod(h, "a", 1500, 1.2)
    be_series(h, [1800] * 10, [5000] * 10, [4000] * 10)  # the real limit is read but not used
    plugin.reconcile()
    # limit = batch-cpu allocatable 2000m: same arithmetic as above -> release 1000m
    assert names(h) == ["a"]


def test_evict_by_allocatable_without_batch_allocatable_evicts_nothing() -> None:
    """A node that reports no ``kubernetes.io/batch-cpu`` has an unknown allocatable
    (Koordinator: -1, not busy), not a 1m one that would make every BE pod a victim."""
    h = harness(cpu_evict_policy="evictByAllocatable")
    h.states.node_info = make_node(8000, 1 << 30, batch_cpu_allocatable_milli=-1)
    plugin = started(h)
    h.clock.advance(20)
    for i in range(3):
        be_pod(h, f"be-{i}", 1500, 1.2)
    be_series(h, [1800] * 10, [5000] * 10, [2000] * 10)
    plugin.reconcile()
    assert h.evictor.evicted == []


def test_standalone_evict_by_allocatable_evicts_nobody() -> None:
    """``--standalone`` builds its NodeInfo from the host, with no Node to report batch-cpu.
    It must say "unknown" (Koordinator's -1: nobody evicted); the dataclass default 0 it used to carry read
    as a zero allocatable, 1m, and every BE pod of this scenario was evicted (the control below)."""
    node = local_node("node-1", HostPaths())
    assert node.batch_cpu_allocatable_milli == api.UNKNOWN
    for batch_allocatable, evicted in ((node.batch_cpu_allocatable_milli, []), (0, ["a", "b", "c", "d"])):
        h = harness(cpu_evict_policy="evictByAllocatable")
        h.states.node_info = dataclasses.replace(node, batch_cpu_allocatable_milli=batch_allocatable)
        plugin = started(h)
        h.clock.advance(20)
        for name in "abcd":
            be_pod(h, name, 1500, 1.2)
        be_series(h, [1800] * 10, [8000] * 10, [2000] * 10)  # BE starved: release 4799m at 1m
        plugin.reconcile()
        assert sorted(names(h)) == evicted


def test_evict_by_allocatable_zero_is_one_millicore() -> None:
    """A reported zero batch allocatable is 1m (Koordinator's ``defaultMinAllocatableBatchMilliCPU``):
    usage counts as high (limit < 1 core), satisfaction 1/5000 -> release int(5000 * (0.6 - 0.0002)) =
    2999m: both pods go."""
    h = harness(cpu_evict_policy="evictByAllocatable")
    h.states.node_info = make_node(8000, 1 << 30, batch_cpu_allocatable_milli=0)
    plugin = started(h)
    h.clock.advance(20)
    be_pod(h, "a", 1500, 1.2)
    be_pod(h, "b", 1500, 0.3)
    be_series(h, [100] * 10, [5000] * 10, [2000] * 10)
    plugin.reconcile()
    assert names(h) == ["a", "b"]


def test_unset_satisfaction_bounds_skip_with_warning(caplog: pytest.LogCaptureFixture) -> None:
    # Out-of-range bounds never reach a plugin (the states informer refuses such a NodeSLO: test_nodeslo)
    h = harness(cpu_evict_be_satisfaction_lower_percent=None)
    plugin = started(h)
    h.clock.advance(20)
    be_pod(h, "a", 1500, 1.2)
    be_series(h, [1800] * 10, [5000] * 10, [2000] * 10)
    with caplog.at_level(logging.WARNING):
        plugin.reconcile()
    assert h.evictor.evicted == []
    assert "cpuEvictBESatisfactionLowerPercent/UpperPercent not set" in caplog.text


def test_switch_off() -> None:
    h = harness()
    h.states.slo = api.NodeSLO()
    plugin = started(h)
    h.clock.advance(20)
    be_pod(h, "a", 1500, 1.2)
    be_series(h, [1800] * 10, [5000] * 10, [2000] * 10)
    plugin.reconcile()
    assert h.evictor.evicted == []


def test_flags() -> None:
    h = harness()
    h.options["cpu-evict-interval-seconds"] = 2.0
    started(h)
    assert [i for i, _ in h.scheduled] == [2.0]
    assert h.options["cpu-evict-cool-time-seconds"] == 20.0
