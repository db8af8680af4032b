"""Aggregations against hand-computed values, including koordlet's lower nearest-rank percentile."""

from __future__ import annotations

from array import array

import pytest

from koordlet.metriccache.aggregate import aggregate_windows, normalize_agg, percentile
from koordlet.metriccache.ring import Window


def _win(values: list[float], t0: float = 0.0) -> Window:
    return Window(array("d", values), t0, t0 + len(values) - 1, values[-1])


def test_percentile_index_rule() -> None:
    # n=4: p50 -> int(2.0)-1 = 1; p90 -> int(3.6)-1 = 2; p99 -> int(3.96)-1 = 2
    vals = [10.0, 20.0, 30.0, 40.0]
    assert percentile(vals, 0.50) == 20.0
    assert percentile(vals, 0.90) == 30.0
    assert percentile(vals, 0.99) == 30.0
    # n=1: int(0.5)-1 = -1, clamped to 0
    assert percentile([7.0], 0.50) == 7.0
    # n=10 (1..10): p50 -> 4 -> 5; p90 -> int(9.0)-1 = 8 -> 9; p95 -> int(9.5)-1 = 8 -> 9
    ten = [float(i) for i in range(1, 11)]
    assert (percentile(ten, 0.5), percentile(ten, 0.9), percentile(ten, 0.95)) == (5.0, 9.0, 9.0)
    # n=100 (1..100): p99 -> int(99.0)-1 = 98 -> 99
    hundred = [float(i) for i in range(1, 101)]
    assert percentile(hundred, 0.99) == 99.0


def test_one_pass_merges_windows_and_sorts_across_them() -> None:
    # Two series: [5, 1, 3] at t=0..2 and [4, 2] at t=10..11 -> merged sorted [1, 2, 3, 4, 5]
    agg = aggregate_windows(
        [_win([5.0, 1.0, 3.0]), _win([4.0, 2.0], t0=10.0)], ["avg", "p50", "p90", "last", "count"]
    )
    assert agg is not None
    assert agg.count == 5
    assert agg["avg"] == 3.0
    assert agg["p50"] == 2.0  # int(2.5)-1 = 1
    assert agg["p90"] == 4.0  # int(4.5)-1 = 3
    assert agg["last"] == 2.0  # the window with the newest timestamp (t=11)
    assert agg["count"] == 5.0
    assert agg.duration == 11.0


def test_empty_is_none_and_names_are_checked() -> None:
    assert aggregate_windows([], ["avg"]) is None
    assert normalize_agg("P90") == "p90"
    with pytest.raises(ValueError):
        normalize_agg("median")
