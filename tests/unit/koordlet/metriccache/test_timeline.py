"""Shared timestamps: a cache whose batched series share their kind's timeline answers every query exactly
as if each series kept its own ring, whatever the appends (gaps, duplicates, late ticks, single appends,
drops, a restart); and the history costs about one double per sample."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from koordlet import api
from koordlet.metriccache import MetricCache, MetricCacheConfig
from koordlet.metriccache.kind import Series
from koordlet.metriccache.ring import Ring
from koordlet.metriccache.timeline import SharedRing, Timeline
from koordlet.testing import FakeClock

METRIC = api.POD_CPU_USAGE
KEYS = ["a", "b", "c", "d"]
# retention 300 s at one sample a minute: rings of 8, so a few dozen ticks wrap them several times
CONFIG = MetricCacheConfig(pod_retention=300.0, collect_interval=60.0)
CAPACITY = CONFIG.capacity_for(METRIC)

op = st.one_of(
    st.tuples(
        st.just("batch"), st.sampled_from([0.0, 1.0, 1.0, 1.0, 2.5, -1.0]), st.lists(st.sampled_from(KEYS))
    ),
    st.tuples(st.just("one"), st.sampled_from([0.0, 1.0, -1.0]), st.sampled_from(KEYS)),
    st.tuples(st.just("drop"), st.just(0.0), st.sampled_from(KEYS)),
    # the same key tuples again and again, as the pod collector passes them (the cache's memo path)
    st.tuples(st.just("cols"), st.sampled_from([1.0, 1.0, 1.0, 0.0, -1.0]), st.integers(0, 9)),
    # private series whose samples are the timeline's newest ticks rejoin it (what expire() runs)
    st.tuples(st.just("reshare"), st.just(0.0), st.just(None)),
)
# and other keys differing in a few places (a pod replaced, added or gone: the memo follows them)
POOL: tuple[Sequence[str], ...] = (
    tuple(KEYS),
    ("a", "b"),
    ("c",),
    ("a", "a"),
    ("a", "c"),
    ("b", "a", "c"),
    ("a", "b", "d"),
    ("a", "b", "c", "c"),
    list(KEYS),
    ("d", "b", "c", "a"),
)


def series_of(cache: MetricCache, key: str) -> Series | None:
    kind = cache._kinds.get(METRIC)
    return None if kind is None else kind.series.get(key)


def assert_same(cache: MetricCache, model: dict[str, Ring], t: float) -> None:
    assert cache.stats().samples == sum(len(r) for r in model.values())
    for key in KEYS:
        series = series_of(cache, key)
        ring = model.get(key)
        if ring is None:
            assert series is None
            continue
        assert series is not None
        got, want = series.ring, ring
        assert len(got) == len(want)
        gts, gvs = got.chronological()
        wts, wvs = want.chronological()
        assert (list(gts), list(gvs)) == (list(wts), list(wvs))
        assert got.newest() == want.newest()
        assert got.in_order == want.in_order
        for start, end in ((t - 3, t), (t - 2.5, t - 1), (t - 100, t + 100), (t - 1, t - 1), (t + 1, t + 2)):
            gw, ww = got.window(start, end), want.window(start, end)
            assert (gw is None) == (ww is None)
            if gw is not None and ww is not None:
                assert (list(gw.values), gw.t_min, gw.t_max, gw.last) == (
                    list(ww.values),
                    ww.t_min,
                    ww.t_max,
                    ww.last,
                )


@settings(max_examples=300, deadline=None)
@given(st.lists(op, max_size=60))
def test_shared_timeline_is_indistinguishable_from_private_rings(
    ops: list[tuple[str, float, Any]],
) -> None:
    cache = MetricCache(CONFIG, clock=FakeClock())
    model: dict[str, Ring] = {}
    t = 100.0
    value = 0.0
    for name, dt, arg in ops:
        t += dt
        if name in ("batch", "cols"):
            keys = list(arg) if name == "batch" else list(POOL[arg])
            samples = []
            for key in keys:
                value += 1
                samples.append((key, value))
                model.setdefault(key, Ring(CAPACITY)).append(t, value)
            if name == "batch":
                assert cache.append_batch(METRIC, samples, t) == len(samples)
            else:
                vals = [v for _, v in samples]
                assert cache.append_columns(METRIC, POOL[arg], vals, t) == len(samples)
        elif name == "reshare":
            kind = cache._kinds.get(METRIC)
            if kind is not None:
                kind.reshare()
        elif name == "one":
            value += 1
            cache.append(METRIC, {"pod_uid": str(arg)}, value, t)
            model.setdefault(str(arg), Ring(CAPACITY)).append(t, value)
        else:
            cache.drop_where("pod_uid", str(arg))
            model.pop(str(arg), None)
        assert_same(cache, model, t)
    kind = cache._kinds.get(METRIC)
    if kind is not None:
        attached = sum(isinstance(s.ring, SharedRing) for s in kind.series.values())
        assert kind.timeline.members == attached


def test_steady_batches_share_one_timeline_and_survive_a_restart(tmp_path: Path) -> None:
    clock = FakeClock()
    config = MetricCacheConfig(tsdb_path=tmp_path, pod_retention=300.0, collect_interval=1.0)
    cache = MetricCache(config, clock=clock, wall_clock=lambda: 1e9 + clock())
    for _ in range(400):
        cache.append_batch(METRIC, [(k, clock()) for k in KEYS])
        clock.advance(1)
    kind = cache._kinds[METRIC]
    assert all(isinstance(s.ring, SharedRing) for s in kind.series.values())
    before = {k: cache.query(METRIC, window=250, agg="avg", labels={"pod_uid": k}) for k in KEYS}
    cache.checkpoint()
    again = MetricCache(config, clock=clock, wall_clock=lambda: 1e9 + clock())
    assert again.load() == len(KEYS)
    kind = again._kinds[METRIC]
    assert all(isinstance(s.ring, SharedRing) for s in kind.series.values())
    assert kind.timeline.members == len(KEYS)
    assert {k: again.query(METRIC, window=250, agg="avg", labels={"pod_uid": k}) for k in KEYS} == before
    again.append_batch(METRIC, [(k, 1.0) for k in KEYS])  # the restored timeline goes on
    assert all(isinstance(s.ring, SharedRing) for s in kind.series.values())
    assert again.query(METRIC, window=0.5, agg="last", labels={"pod_uid": "a"}) is not None


def test_history_costs_about_one_double_per_sample() -> None:
    # 1000 containers x 2 metrics at one sample a second, rings full (the steady state)
    clock = FakeClock()
    config = MetricCacheConfig(pod_retention=600.0, collect_interval=1.0)
    containers = [f"containerd://{i:064x}" for i in range(1000)]
    samples = config.capacity_for(api.CONTAINER_CPU_USAGE)
    gc.collect()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        cache = MetricCache(config, clock=clock)
        for _ in range(samples):
            cache.append_batch(api.CONTAINER_CPU_USAGE, [(c, 0.25) for c in containers])
            cache.append_batch(api.CONTAINER_MEMORY_USAGE, [(c, 1.5e9) for c in containers])
            clock.advance(1)
        gc.collect()
        used, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert cache.stats().samples == 2000 * samples
    per_sample = (used - base) / (2000 * samples)
    # One double per value, the timestamps once per kind, a few hundred bytes of objects per series.
    assert 8.0 <= per_sample < 10.0, per_sample  # private rings: 16-21; boxed floats in lists: ~64


def test_a_series_that_missed_a_tick_shares_again_once_the_miss_aged_out() -> None:
    """One missed tick left a series private for good (twice the bytes a sample); over hours,
    most series of a 1000-pod node were. Once its samples are the timeline's newest ticks again (the
    miss older than its ring), ``expire`` puts it back."""
    clock = FakeClock()
    cache = MetricCache(CONFIG, clock=clock)
    keys = ("a", "b")

    def tick(*present: str) -> None:
        clock.advance(60)
        cache.append_batch(METRIC, [(k, clock()) for k in present], clock())

    for _ in range(3):
        tick(*keys)
    tick(keys[0])  # b misses a tick: private
    assert cache.stats().private_series == 1
    for i in range(CAPACITY):
        tick(*keys)
        cache.expire()
        still_private = i < CAPACITY - 1  # until the ring no longer holds samples from before the miss
        assert cache.stats().private_series == still_private, i
    b = series_of(cache, "b")
    assert b is not None and isinstance(b.ring, SharedRing)
    ts, vs = b.ring.chronological()
    assert list(vs) == list(ts) and len(ts) == CAPACITY  # the same samples as before


class _Watched(SharedRing):
    """A series' ring counting every attribute read and write of it."""

    __slots__ = ()
    touched = 0

    def __getattribute__(self, name: str) -> Any:
        _Watched.touched += 1
        return super().__getattribute__(name)

    def __setattr__(self, name: str, value: Any) -> None:
        _Watched.touched += 1
        super().__setattr__(name, value)


def test_a_steady_tick_is_written_without_touching_the_series_objects(monkeypatch: Any) -> None:
    """The collector's tick of a thousand series: the values go into the timeline's block in the memo's
    column order; no series' own object (scattered over the heap) is read or written."""
    clock = FakeClock()
    cache = MetricCache(CONFIG, clock=clock)
    keys = tuple(f"uid-{i}" for i in range(1000))
    for i in range(3):
        cache.append_columns(METRIC, keys, [float(i)] * 1000)
        clock.advance(60)
    kind = cache._kinds[METRIC]
    for series in kind.series.values():
        series.ring.__class__ = _Watched
    monkeypatch.setattr(_Watched, "touched", 0)
    cache.append_columns(METRIC, keys, [7.0] * 1000)
    assert _Watched.touched == 0
    for series in kind.series.values():
        series.ring.__class__ = SharedRing
    got = cache.query(METRIC, window=0.5, agg="last", labels={"pod_uid": "uid-999"})
    assert got is not None and got.value == 7.0


def test_the_block_of_series_gone_for_good_is_handed_back() -> None:
    """A thousand pods, then three: once the gone series are dropped, expiry repacks the kind's block to
    the series still attached, whose samples stay the same."""
    clock = FakeClock()
    config = MetricCacheConfig(pod_retention=300.0, collect_interval=2.0)
    capacity = config.capacity_for(METRIC)
    keys = tuple(f"uid-{i}" for i in range(1000))
    kept = ("uid-3", "uid-500", "uid-999")
    gc.collect()
    tracemalloc.start()
    try:
        cache = MetricCache(config, clock=clock)
        for i in range(capacity):
            cache.append_columns(METRIC, keys, [float(i * 1000 + k) for k in range(1000)])
            clock.advance(1)
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
        before = {k: series_of(cache, k).ring.chronological() for k in kept}  # type: ignore[union-attr]
        for key in keys:
            if key not in kept:
                cache.drop_where("pod_uid", key)
        cache.expire()
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held - after >= 997 * capacity * 8
    assert {k: series_of(cache, k).ring.chronological() for k in kept} == before  # type: ignore[union-attr]
    kind = cache._kinds[METRIC]
    assert kind.timeline.members == 3
    cache.append_columns(METRIC, kept, [1.0, 2.0, 3.0])  # the timeline goes on
    assert kind.timeline.members == 3
    assert kind.memo is not None and kind.memo.start == 0
    for key, value in zip(kept, (1.0, 2.0, 3.0), strict=True):
        ts, vs = series_of(cache, key).ring.chronological()  # type: ignore[union-attr]
        assert (list(ts[:-1]), list(vs[:-1])) == (list(before[key][0][1:]), list(before[key][1][1:]))
        assert vs[-1] == value


def test_pods_replaced_keep_a_batch_in_column_order_with_the_same_samples() -> None:
    """Pods replaced as the pod sweep replaces them (the last moved into the gone one's place, the new one
    last; or one more, or one fewer): the memo follows, the block's columns are lined up in the batch's
    order again (one slice a tick), and every series holds what a ring of its own would."""
    clock = FakeClock()
    cache = MetricCache(CONFIG, clock=clock)
    keys = [f"uid-{i}" for i in range(50)]
    model: dict[str, Ring] = {}
    fresh = iter(range(50, 10_000))
    for step in range(4 * CAPACITY):
        if step % 3 == 2:
            gone = keys[(step * 7) % len(keys)]
            last = keys.pop()
            if gone != last:
                keys[keys.index(gone)] = last
            if step % 9 != 8:
                keys.append(f"uid-{next(fresh)}")
            if step % 15 == 14:
                keys.append(f"uid-{next(fresh)}")
        batch = tuple(keys)
        values = [clock() + i for i in range(len(batch))]
        for key, value in zip(batch, values, strict=True):
            model.setdefault(key, Ring(CAPACITY)).append(clock(), value)
        cache.append_columns(METRIC, batch, values)
        kind = cache._kinds[METRIC]
        assert kind.memo is not None and kind.memo.start >= 0, step
        assert kind.timeline.members == len(batch)
        for key, ring in model.items():
            series = series_of(cache, key)
            assert series is not None
            got, want = series.ring.chronological(), ring.chronological()
            assert (list(got[0]), list(got[1])) == (list(want[0]), list(want[1])), (step, key)
        clock.advance(60)


def test_a_batch_on_the_per_key_path_lines_its_columns_up_when_few_are_out_of_order() -> None:
    """After a drop (the memo no longer holds) a batch with two series swapped goes the per-key way; their
    columns are swapped too, so the next ticks are one slice, with the same samples."""
    clock = FakeClock()
    cache = MetricCache(CONFIG, clock=clock)
    keys = [f"uid-{i}" for i in range(20)]
    for i in range(3):
        cache.append_columns(METRIC, tuple(keys), [float(i)] * 20)
        clock.advance(60)
    cache.drop_where("pod_uid", "uid-19")
    keys.pop()
    keys[3], keys[11] = keys[11], keys[3]
    before = {k: series_of(cache, k).ring.chronological() for k in keys}  # type: ignore[union-attr]
    cache.append_columns(METRIC, tuple(keys), [float(i) for i in range(19)])
    kind = cache._kinds[METRIC]
    assert kind.memo is not None and kind.memo.start == 0
    for i, key in enumerate(keys):
        ts, vs = series_of(cache, key).ring.chronological()  # type: ignore[union-attr]
        assert (list(ts[:-1]), list(vs[:-1])) == (list(before[key][0]), list(before[key][1]))
        assert vs[-1] == float(i)


def test_pods_added_one_by_one_grow_the_block_seldom(monkeypatch: Any) -> None:
    """Each growth copies the whole block: a pod added per tick must not grow it each time."""
    grown = 0
    real = Timeline._grow

    def counting(self: Timeline, more: int) -> None:
        nonlocal grown
        grown += 1
        real(self, more)

    monkeypatch.setattr(Timeline, "_grow", counting)
    clock = FakeClock()
    cache = MetricCache(CONFIG, clock=clock)
    keys: tuple[str, ...] = ()
    for i in range(400):
        keys = (*keys, f"uid-{i}")
        cache.append_columns(METRIC, keys, [1.0] * len(keys))
        clock.advance(60)
        kind = cache._kinds[METRIC]
        assert kind.memo is not None and kind.memo.start >= 0
    assert grown <= 40
