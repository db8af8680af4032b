"""Ring buffer: growth up to capacity, wrap-around, windows by binary search, out-of-order appends."""

from __future__ import annotations

from array import array

import pytest

from koordlet.metriccache.ring import Ring


def _fill(ring: Ring, samples: list[tuple[float, float]]) -> None:
    for t, v in samples:
        ring.append(t, v)


def test_grows_until_capacity_then_overwrites_oldest() -> None:
    ring = Ring(4)
    _fill(ring, [(1, 10), (2, 20), (3, 30)])
    assert len(ring) == 3
    _fill(ring, [(4, 40), (5, 50), (6, 60)])
    assert len(ring) == 4
    ts, vs = ring.chronological()
    assert list(ts) == [3, 4, 5, 6]
    assert list(vs) == [30, 40, 50, 60]
    assert ring.ts.typecode == "d" and ring.vs.typecode == "d"


def test_window_after_wrap_spans_both_physical_segments() -> None:
    ring = Ring(5)
    _fill(ring, [(float(t), float(t * 10)) for t in range(1, 9)])  # holds t = 4..8, head mid-array
    assert ring.head != 0
    w = ring.window(4.5, 8.0)
    assert w is not None
    assert list(w.values) == [50, 60, 70, 80]
    assert (w.t_min, w.t_max, w.last) == (5, 8, 80)
    w = ring.window(3.0, 5.0)  # the window's lower end is older than anything kept
    assert w is not None and list(w.values) == [40, 50]
    assert ring.window(8.5, 100) is None
    assert ring.window(0, 3.9) is None


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 23])
def test_windows_agree_with_a_linear_scan_at_every_fill_level(n: int) -> None:
    ring = Ring(8)
    samples = [(float(t), float(t) * 1.5) for t in range(n)]
    _fill(ring, samples)
    kept = samples[-8:]
    for lo in range(-1, n + 1):
        for hi in range(lo, n + 2):
            expected = [v for t, v in kept if lo <= t <= hi]
            w = ring.window(lo, hi)
            assert (list(w.values) if w else []) == expected, (lo, hi)


def test_out_of_order_append_switches_to_scan_and_last_is_max_timestamp() -> None:
    ring = Ring(10)
    _fill(ring, [(1, 1.0), (5, 5.0), (3, 3.0)])
    assert not ring.in_order
    w = ring.window(2, 6)
    assert w is not None
    assert sorted(w.values) == [3.0, 5.0]
    assert w.last == 5.0 and (w.t_min, w.t_max) == (3, 5)
    assert ring.newest() == (5, 5.0)


def test_equal_timestamps_last_goes_to_later_append() -> None:
    ring = Ring(10)
    _fill(ring, [(1, 1.0), (2, 7.0), (2, 9.0)])
    w = ring.window(0, 3)
    assert w is not None and w.last == 9.0
    ring.append(0.5, 4.0)  # out of order now; the tie rule must still hold on the scan path
    w = ring.window(0, 3)
    assert w is not None and w.last == 9.0
    assert ring.newest() == (2, 9.0)


def test_reset_keeps_the_newest() -> None:
    ring = Ring(6)
    ring.reset(array("d", [1, 2, 3, 4, 5, 6, 7, 8]), array("d", [10, 20, 30, 40, 50, 60, 70, 80]))
    assert list(ring.chronological()[1]) == [30, 40, 50, 60, 70, 80]
    ring.append(9, 90)
    assert list(ring.chronological()[1]) == [40, 50, 60, 70, 80, 90]
    with pytest.raises(ValueError):
        ring.reset(array("d", [1]), array("d", []))
