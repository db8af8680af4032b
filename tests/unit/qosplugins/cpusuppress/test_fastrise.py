"""RiseDetector: the fast path's noise band is learnt from the samples, survives the level shifts it is
there to detect, and tells a spike from bounded noise."""

from __future__ import annotations

import random

from qosplugins.cpusuppress.fastrise import RiseDetector

STEP = 0.05


def feed(d: RiseDetector, t: float, values: list[float], baseline: float) -> tuple[float, list[bool]]:
    fired = []
    for v in values:
        t += STEP
        fired.append(d.observe(t, v, baseline, floor=20.0))
    return t, fired


def wobble(level: float, spread: float, n: int, rng: random.Random) -> list[float]:
    return [level + rng.uniform(-spread, spread) for _ in range(n)]


def test_nothing_fires_before_a_block_of_samples_gave_a_band() -> None:
    d = RiseDetector()
    _t, fired = feed(d, 0.0, [100.0] * 5 + [5000.0], baseline=100.0)
    assert d.band is None and fired == [False] * 6


def test_bounded_noise_never_fires_and_a_spike_does() -> None:
    rng = random.Random(7)
    d = RiseDetector()
    t, fired = feed(d, 0.0, wobble(500.0, 100.0, 400, rng), baseline=500.0)
    assert not any(fired) and d.band is not None and 50 < d.band < 110
    t, fired = feed(d, t, [1500.0], baseline=500.0)
    assert fired == [True]


def test_the_fall_of_the_last_spike_does_not_hide_the_next() -> None:
    """A load that stopped a second ago sits in the samples as a high level; the band must not take it
    for noise (a band over a plain 2 s window did, and the next spike waited for the 1 s tick)."""
    rng = random.Random(3)
    d = RiseDetector()
    t, _ = feed(d, 0.0, wobble(1000.0, 30.0, 40, rng), baseline=1000.0)
    t, fired = feed(d, t, wobble(60.0, 30.0, 20, rng), baseline=60.0)  # LS stopped: 1 s ago
    assert not any(fired)
    t, fired = feed(d, t, [1060.0], baseline=60.0)
    assert fired == [True]


def test_a_spike_seen_first_in_part_fires_at_its_full_rate() -> None:
    """The first window of a spike that starts late in it reads a small part of it and does not fire;
    that sample must not widen the band so that the spike's full rate, next window, fires neither."""
    rng = random.Random(5)
    d = RiseDetector()
    t, _ = feed(d, 0.0, wobble(100.0, 40.0, 30, rng), baseline=100.0)
    band = d.band
    assert band is not None
    t, fired = feed(d, t, [100.0 + 2.0 * band], baseline=100.0)  # under 2.5 bands: not yet
    assert fired == [False]
    t, fired = feed(d, t, [1100.0], baseline=100.0)
    assert fired == [True]
    t, fired = feed(d, t, wobble(1100.0, 40.0, 20, rng), baseline=1100.0)  # the decision follows
    assert not any(fired)


def test_level_is_the_median_of_the_last_quarter_second() -> None:
    d = RiseDetector()
    t, _ = feed(d, 0.0, [100.0] * 10, baseline=100.0)
    t, _ = feed(d, t, [100.0, 100.0, 100.0, 100.0, 900.0], baseline=100.0)  # one peak is not a level
    assert d.level(t) == 100.0
    t, _ = feed(d, t, [900.0] * 4, baseline=100.0)
    assert d.level(t) == 900.0
    assert d.level(t + 1.0) is None


def wide_band(rng: random.Random) -> tuple[RiseDetector, float, float]:
    """A detector that learnt a busy node's band: +-300 around 1000 (band ~300)."""
    d = RiseDetector()
    t, _ = feed(d, 0.0, wobble(1000.0, 300.0, 60, rng), baseline=1000.0)
    assert d.band is not None and 200 < d.band < 320
    return d, t, d.band


def test_a_smaller_rise_that_holds_is_reported_once_as_its_lowest_sample() -> None:
    """On a busy node 2.5 bands exceeded a whole LS core and its spike waited for the 1 s tick;
    a rise of 2 bands in the window, its confirm window and the next window is real."""
    d, t, band = wide_band(random.Random(11))
    rise = [1000.0 + 2.0 * band, 1000.0 + 2.2 * band, 1000.0 + 2.1 * band]
    fired = [d.observe(t + dt, v, 1000.0, 20.0) for dt, v in zip((0.04, 0.05, 0.09), rise, strict=False)]
    assert fired == [False, False, False]  # under 2.5 bands: no single sample says it
    assert d.held() == rise[0]  # three samples over one interval: the least of them
    assert d.held() is None  # once
    assert d.observe(t + 0.13, rise[1], 1000.0, 20.0) is False and d.held() is None  # a new run starts


def test_short_bursts_and_a_moving_decision_make_no_held_rise() -> None:
    d, t, band = wide_band(random.Random(13))
    high, low = 1000.0 + 2.0 * band, 1000.0
    for _ in range(20):  # two-sample bursts (a window and its confirm) between quiet windows
        for dt, v in ((0.04, high), (0.01, high), (0.04, low)):
            t += dt
            d.observe(t, v, 1000.0, 20.0)
            assert d.held() is None
    for dt, base in ((0.04, 1000.0), (0.01, 1000.0), (0.04, 1100.0)):  # the decision moved in between
        t += dt
        d.observe(t, high + 150, base, 20.0)
    assert d.held() is None
    for dt in (0.2, 0.2, 0.2):  # samples too far apart (a stalled sampler) are not a run
        t += dt
        d.observe(t, high, 1000.0, 20.0)
    assert d.held() is None


def test_bounded_noise_never_holds() -> None:
    rng = random.Random(17)
    d = RiseDetector()
    t = 0.0
    for v in wobble(500.0, 100.0, 2000, rng):
        t += 0.04
        d.observe(t, v, 500.0, 20.0)
        assert d.held() is None
