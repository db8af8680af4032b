"""BEMemoryEvict: threshold and lower bound, victim order, cool-down, who may never be evicted."""

from __future__ import annotations

import json

import pytest

from koordlet import api
from koordlet.testing import Harness, be_slo, make_harness, make_node, make_pod
from qosplugins.memoryevict import BEMemoryEvict

CAPACITY = 100_000  # bytes: percentages of it are easy to read


def harness(**slo: object) -> Harness:
    return make_harness(1, node=make_node(4000, CAPACITY), slo=be_slo(**slo))


def pod_with_memory(
    h: Harness, name: str, used: float, qos: api.QOSClass = api.QOSClass.BE, **kw: object
) -> api.PodInfo:
    pod = h.add_pod(make_pod(name, qos, **kw))  # type: ignore[arg-type]
    h.metrics.set(api.POD_MEMORY_USAGE, used, {"pod_uid": pod.uid})
    return pod


def started(h: Harness) -> BEMemoryEvict:
    plugin = BEMemoryEvict()
    h.start(plugin)
    return plugin


def names(h: Harness) -> list[str]:
    return [p.name for p, _, _ in h.evictor.evicted]


@pytest.mark.parametrize("version", [1, 2])
def test_evicts_largest_be_until_below_lower_bound(version: int) -> None:
    h = make_harness(version, node=make_node(4000, CAPACITY), slo=be_slo())
    pod_with_memory(h, "be1", 3000)
    pod_with_memory(h, "be2", 5000)
    pod_with_memory(h, "be3", 1000)
    pod_with_memory(h, "ls", 20000, api.QOSClass.LS)
    h.metrics.set(api.NODE_MEMORY_USAGE, 75_000)
    started(h).reconcile()
    # usage% = 75 >= 70; lower = 70 - 2 = 68 -> release 75000 - 68000 = 7000
    # by usage: be2 (5000, released 5000 < 7000), be1 (3000, released 8000) -> stop
    assert names(h) == ["be2", "be1"]
    _, reason, message = h.evictor.evicted[0]
    assert reason == "evicted"  # Koordinator's reason label (EvictedStr)
    assert message == "trigger by koordlet feature BEMemoryEvict, kill pod: be2"


def test_unlabelled_besteffort_pod_is_not_a_candidate() -> None:
    """Koordinator's BE eviction takes pods whose ``koordinator.sh/qosClass`` label is
    BE; a kube BestEffort pod without the label (BE only by default) is left alone."""
    h = harness()
    plain = h.add_pod(make_pod("plain", kube_qos=api.KubeQOSClass.BESTEFFORT))
    h.metrics.set(api.POD_MEMORY_USAGE, 30_000, {"pod_uid": plain.uid})
    assert plain.qos is api.QOSClass.BE and plain.qos_raw is api.QOSClass.NONE
    pod_with_memory(h, "labelled", 1000)
    h.metrics.set(api.NODE_MEMORY_USAGE, 75_000)  # release 7000: the unlabelled 30000 would cover it
    started(h).reconcile()
    assert names(h) == ["labelled"]


def test_below_threshold_nothing_happens() -> None:
    h = harness()
    pod_with_memory(h, "be", 50_000)
    h.metrics.set(api.NODE_MEMORY_USAGE, 69_999)  # int(69.999%) = 69 < 70
    started(h).reconcile()
    assert h.evictor.evicted == []


def test_explicit_lower_percent() -> None:
    h = harness(memory_evict_threshold_percent=80, memory_evict_lower_percent=60)
    for i, used in enumerate([4000, 6000, 7000, 9000]):
        pod_with_memory(h, f"be{i}", used)
    h.metrics.set(api.NODE_MEMORY_USAGE, 80_000)
    started(h).reconcile()
    # release = 80000 - 60000 = 20000: 9000 + 7000 = 16000 < 20000, + 6000 = 22000 -> three pods
    assert names(h) == ["be3", "be2", "be1"]


def test_lower_priority_goes_first_then_usage_then_zero_usage_last() -> None:
    h = harness()
    pod_with_memory(h, "idle", 0)
    pod_with_memory(h, "important", 9000, priority=100)
    pod_with_memory(h, "cheap", 100, priority=10)
    h.metrics.set(api.NODE_MEMORY_USAGE, 90_000)
    started(h).reconcile()
    # release 90000 - 68000 = 22000 > all BE usage: everyone goes, in koordlet's order
    assert names(h) == ["cheap", "important", "idle"]


def test_recently_evicted_pods_count_as_released() -> None:
    h = harness()
    big = pod_with_memory(h, "big", 5000)
    pod_with_memory(h, "mid", 3000)
    pod_with_memory(h, "small", 1000)
    h.evictor.recent.add(big.uid)
    h.metrics.set(api.NODE_MEMORY_USAGE, 75_000)
    started(h).reconcile()
    # release 7000: big counts 5000 without a new eviction, mid brings it to 8000
    assert names(h) == ["mid"]


def test_cool_down_between_rounds() -> None:
    h = harness()
    for i in range(4):
        pod_with_memory(h, f"be{i}", 2000 + i)
    h.metrics.set(api.NODE_MEMORY_USAGE, 71_000)
    plugin = started(h)
    plugin.reconcile()
    # release 71000 - 68000 = 3000: be3 (2003) then be2 (2002) -> 4005
    assert names(h) == ["be3", "be2"]
    h.states.pod_list = [p for p in h.states.pod_list if p.uid not in h.evictor.recent]  # they are gone
    h.clock.advance(1)
    h.metrics.set(api.NODE_MEMORY_USAGE, 71_000)
    plugin.reconcile()
    assert len(h.evictor.evicted) == 2  # within 4 s of the last eviction
    h.clock.advance(3.5)  # 4.5 s after it
    h.metrics.set(api.NODE_MEMORY_USAGE, 71_000)
    plugin.reconcile()
    assert names(h) == ["be3", "be2", "be1", "be0"]


def test_never_evicts_non_be_daemonset_static_inactive_or_disallowed() -> None:
    h = harness()
    pod_with_memory(h, "ls", 30_000, api.QOSClass.LS)
    pod_with_memory(h, "lsr", 30_000, api.QOSClass.LSR)
    pod_with_memory(h, "ds", 30_000, owner_kind="DaemonSet")
    pod_with_memory(h, "static", 30_000, owner_kind="Node")
    pod_with_memory(h, "mirror", 30_000, annotations={"kubernetes.io/config.mirror": "x"})
    pod_with_memory(h, "done", 30_000, phase="Succeeded")
    pod_with_memory(
        h, "optout", 30_000, annotations={"koordinator.sh/eviction-policy": json.dumps(["BECPUEvict"])}
    )
    pod_with_memory(h, "garbled", 30_000, annotations={"koordinator.sh/eviction-policy": "{"})
    optin = {"koordinator.sh/eviction-policy": json.dumps(["BEMemoryEvict"])}
    pod_with_memory(h, "optin", 10, annotations=optin)
    h.metrics.set(api.NODE_MEMORY_USAGE, 99_000)
    started(h).reconcile()
    assert names(h) == ["optin"]


def test_switch_off() -> None:
    h = make_harness(1, node=make_node(4000, CAPACITY), slo=api.NodeSLO())
    pod_with_memory(h, "be", 50_000)
    h.metrics.set(api.NODE_MEMORY_USAGE, 99_000)
    plugin = started(h)
    plugin.reconcile()
    assert h.evictor.evicted == []


def test_flags_and_schedule() -> None:
    h = harness()
    h.options["memory-evict-interval-seconds"] = 2.0
    started(h)
    assert [i for i, _ in h.scheduled] == [2.0]
    assert h.options["memory-evict-cool-time-seconds"] == 4.0
