from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from koordshared.runtime import heap


@pytest.fixture(autouse=True)
def collector_as_it_was() -> Iterator[None]:
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        if enabled:
            gc.enable()
        else:
            gc.disable()


def test_held_then_settled_what_lived_is_frozen_and_collection_resumes() -> None:
    heap.hold()
    assert not gc.isenabled()
    before = gc.get_count()[0]
    cached = [{"metadata": {"name": f"pod-{i}"}} for i in range(5000)]  # the caches filling
    # With collection on, the first generation's count is reset every 700 objects.
    assert gc.get_count()[0] >= before + len(cached)
    thresholds = gc.get_threshold()
    heap.settle(collect=False)
    assert gc.isenabled()
    assert gc.get_threshold() == thresholds
    assert gc.get_freeze_count() >= len(cached)  # the cache left the collector's view


def test_a_young_threshold_replaces_only_the_first_generations() -> None:
    older = gc.get_threshold()[1:]
    heap.hold()
    heap.settle(collect=False, young_threshold=50_000)
    assert gc.get_threshold() == (50_000, *older)


def test_settling_with_a_collection_frees_the_cycles_the_start_left() -> None:
    heap.hold()

    class Node:
        def __init__(self) -> None:
            self.me = self

    left = weakref.ref(Node())  # an unreachable cycle: nothing frees it while held
    assert left() is not None
    heap.settle(collect=True)
    assert left() is None
