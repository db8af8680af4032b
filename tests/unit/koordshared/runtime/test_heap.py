"""The garbage collector held while a scheduler's caches fill and the synced heap frozen: thresholds, what
is frozen, and garbage still collected while held."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from koordshared.runtime import heap


@pytest.fixture(autouse=True)
def collector_as_it_was() -> Iterator[None]:
    heap.settle(collect=False)  # a hold an in-process scheduler of another test left
    gc.unfreeze()
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        heap.settle(collect=False)  # a test that left it held
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        if not enabled:
            gc.disable()


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_held_then_settled_what_lived_is_frozen_and_the_thresholds_come_back() -> None:
    thresholds = gc.get_threshold()
    heap.hold()
    before = gc.get_count()[0]
    cached = [{"metadata": {"name": f"pod-{i}"}} for i in range(5000)]  # the caches filling
    # At the default thresholds the first generation's count is reset every 700 objects.
    assert gc.get_count()[0] >= before + len(cached)
    heap.hold()  # twice: still the thresholds of before the first
    heap.settle(collect=False)
    assert gc.isenabled()
    assert gc.get_threshold() == thresholds
    assert gc.get_freeze_count() >= len(cached)  # the cache left the collector's view


def test_garbage_is_still_collected_while_held_for_a_start_that_never_syncs() -> None:
    heap.hold()
    left = weakref.ref(Cycle())
    alive: list[list[int]] = [[] for _ in range(heap.HOLD_THRESHOLD + 1000)]  # new objects the count sees
    assert left() is None and alive


def test_thresholds_given_replace_those_before_the_hold() -> None:
    heap.hold()
    heap.settle(collect=False, thresholds=(50_000, 20, 100))
    assert gc.get_threshold() == (50_000, 20, 100)


def test_settling_with_a_collection_frees_the_cycles_the_start_left() -> None:
    heap.hold()
    left = weakref.ref(Cycle())  # an unreachable cycle: not collected while held, short of 200 000 objects
    assert left() is not None
    heap.settle(collect=True)
    assert left() is None
