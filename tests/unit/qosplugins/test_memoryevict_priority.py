"""``MemoryEvict`` and ``MemoryAllocatableEvict``, from Koordinator's ``memory_evict.go``
formulas: the usage trigger with and without a lower percent, victims by priority counted in bytes, the
allocatable target, one round with ``BEMemoryEvict`` and the shared 4 s cool-down."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest

from koordlet import api
from koordlet.testing import Harness, be_slo, make_harness, make_node, make_pod
from qosplugins.memoryevict import BEMemoryEvict

P = api.PriorityClass
OPTED_IN = {api.LABEL_EVICTION_ENABLED: "true"}
CAPACITY = 100_000


def harness(gates: dict[str, bool], node: api.NodeInfo | None = None, **slo: Any) -> Harness:
    h = make_harness(1, node=node or make_node(4000, CAPACITY), slo=be_slo(**slo))
    h.agent = api.AgentOptions(feature_gates={"BEMemoryEvict": False, **gates})
    return h


def started(h: Harness) -> BEMemoryEvict:
    plugin = BEMemoryEvict()
    h.start(plugin)
    return plugin


def pod(h: Harness, name: str, memory: float | None, **kw: Any) -> api.PodInfo:
    kw.setdefault("labels", OPTED_IN)
    kw.setdefault("qos", api.QOSClass.LS)
    p = h.add_pod(make_pod(name, **kw))
    if memory is not None:
        h.metrics.set(api.POD_MEMORY_USAGE, memory, {"pod_uid": p.uid})
    return p


def evicted(h: Harness) -> list[str]:
    return [p.name for p, _, _ in h.evictor.evicted]


class _Usage(TypedDict):
    memory_evict_threshold_percent: int
    evict_enabled_priority_threshold: int


USAGE: _Usage = {"memory_evict_threshold_percent": 70, "evict_enabled_priority_threshold": 5999}


@pytest.mark.parametrize(
    ("lower", "used", "victims"),
    [
        # 75 % >= 70 %; lower 68 (threshold - 2): release 75000 - 68000 = 7000 bytes: a (5000) + b (3000)
        (None, 75_000, ["a", "b"]),
        # 72 %, lower 69: release 3000: a alone (in bytes; koordlet's x1000 takes a for anything)
        (69, 72_000, ["a"]),
        # lower 60: release 15000: a + b + c (1000) = 9000 < 15000: every victim
        (60, 75_000, ["a", "b", "c"]),
        # 69 % < 70 %: nothing
        (None, 69_999, []),
    ],
)
def test_memory_evict_releases_usage_down_to_the_lower_percent(
    lower: int | None, used: int, victims: list[str]
) -> None:
    h = harness({"MemoryEvict": True}, memory_evict_lower_percent=lower, **USAGE)
    plugin = started(h)
    pod(h, "a", 5000, priority_class=P.BATCH)
    pod(h, "b", 3000, priority_class=P.BATCH)
    pod(h, "c", 1000, priority_class=P.BATCH)
    pod(h, "prod", 40_000, priority_class=P.PROD)  # 9500 > 5999: never a victim
    pod(h, "not-opted-in", 40_000, priority_class=P.BATCH, labels={})
    h.metrics.set(api.NODE_MEMORY_USAGE, used)
    plugin.reconcile()
    assert evicted(h) == victims


def test_memory_evict_needs_its_priority_threshold() -> None:
    h = harness({"MemoryEvict": True}, memory_evict_threshold_percent=70)
    plugin = started(h)
    pod(h, "a", 5000, priority_class=P.BATCH)
    h.metrics.set(api.NODE_MEMORY_USAGE, 90_000)
    plugin.reconcile()
    assert evicted(h) == []


def test_be_memory_evict_and_memory_evict_release_together() -> None:
    """Both release usage: what the BE task's victims released counts toward ``MemoryEvict``, which
    evicts only for what remains (Koordinator: BEMemoryEvict first, the release cumulative)."""
    h = harness({"BEMemoryEvict": True, "MemoryEvict": True}, **USAGE)
    plugin = started(h)
    pod(h, "be", 4000, qos=api.QOSClass.BE, labels={})  # a BE task victim only (not opted in)
    pod(h, "batch-big", 2500, priority_class=P.BATCH)
    pod(h, "batch-small", 2000, priority_class=P.BATCH)
    h.metrics.set(api.NODE_MEMORY_USAGE, 74_000)  # release 6000: be 4000 + batch-big 2500
    plugin.reconcile()
    assert evicted(h) == ["be", "batch-big"]


ALLOC = {
    "memory_allocatable_evict_threshold_percent": 110,
    "memory_allocatable_evict_lower_percent": 100,
    "allocatable_evict_priority_threshold": 7999,
}


@pytest.mark.parametrize(
    ("alloc", "victims"),
    [
        # 12000 + 9000 + 4000 = 25000 of 20000 = 125 % > 110 %: release 5000, largest request first
        (20_000, ["r12000"]),
        # 25000 / 22800 = 109.6 %: nothing
        (22_800, []),
        (api.UNKNOWN, []),
    ],
)
def test_memory_allocatable_evict_by_batch_memory_requests(alloc: int, victims: list[str]) -> None:
    node = make_node(4000, CAPACITY, batch_memory_allocatable_bytes=alloc)
    h = harness({"MemoryAllocatableEvict": True}, node=node, **ALLOC)
    plugin = started(h)
    for request in (12_000, 9_000, 4_000):
        pod(h, f"r{request}", 100, priority_class=P.BATCH, batch_memory_request_bytes=request)
    h.metrics.set(api.NODE_MEMORY_USAGE, 10_000)  # node memory is not what this strategy looks at
    plugin.reconcile()
    assert evicted(h) == victims


def test_cool_down_of_four_seconds_is_shared() -> None:
    h = harness({"MemoryEvict": True}, **USAGE)
    plugin = started(h)
    pods = [pod(h, name, None, priority_class=P.BATCH) for name in "ab"]

    def full_after(seconds: float) -> None:
        h.clock.advance(seconds)
        h.metrics.set(api.NODE_MEMORY_USAGE, 75_000)
        for p in pods:
            h.metrics.set(api.POD_MEMORY_USAGE, 8000, {"pod_uid": p.uid})
        plugin.reconcile()

    full_after(0)
    assert evicted(h) == ["b"]  # equal usage: name descending
    h.evictor.recent.clear()
    h.states.pod_list.pop()
    full_after(3.9)
    assert evicted(h) == ["b"]
    full_after(0.1)
    assert evicted(h) == ["b", "a"]
