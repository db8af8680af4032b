"""MetricCache: windows on the injected clock, label-subset merging, bulk appends, removal, KV, stats."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.metriccache import MetricCache, MetricCacheConfig, series_key
from koordlet.metriccache.timeline import SharedRing
from koordlet.testing import FakeClock
from koordshared.runtime.errors import InvalidValue
from tests.support.counting import count_series_lookups


@pytest.fixture
def cache(fake_clock: FakeClock) -> MetricCache:
    return MetricCache(clock=fake_clock, wall_clock=fake_clock.wall)


def test_is_a_metric_reader(cache: MetricCache) -> None:
    reader: api.MetricReader = cache
    assert reader.query(api.NODE_CPU_USAGE, window=60) is None


def test_window_excludes_old_points(cache: MetricCache, fake_clock: FakeClock) -> None:
    for v in [100.0, 1.0, 2.0, 3.0, 6.0]:
        cache.append(api.NODE_CPU_USAGE, None, v)
        fake_clock.advance(10)
    # samples at now-50 (100), now-40 (1), now-30, now-20, now-10 (6)
    r = cache.query(api.NODE_CPU_USAGE, window=45, agg="avg")
    assert r is not None
    assert (r.value, r.count, r.duration) == (3.0, 4, 30.0)
    last = cache.query(api.NODE_CPU_USAGE, window=45)
    assert last is not None and last.value == 6.0
    cnt = cache.query(api.NODE_CPU_USAGE, window=50, agg="count")
    assert cnt is not None and cnt.value == 5.0
    assert cache.query(api.NODE_CPU_USAGE, window=5) is None


def test_wall_clock_steps_do_not_move_windows(fake_clock: FakeClock) -> None:
    wall = [1_700_000_000.0]
    cache = MetricCache(clock=fake_clock, wall_clock=lambda: wall[0])
    cache.append(api.NODE_CPU_USAGE, None, 1.0)
    wall[0] -= 3600.0  # NTP step back an hour; monotonic time goes on
    fake_clock.advance(1)
    cache.append(api.NODE_CPU_USAGE, None, 3.0)
    r = cache.query(api.NODE_CPU_USAGE, window=10, agg="avg")
    assert r is not None and (r.value, r.count, r.duration) == (2.0, 2, 1.0)


def test_ring_wraps_at_capacity(fake_clock: FakeClock) -> None:
    cfg = MetricCacheConfig(node_retention=10, collect_interval=1, capacity_slack=0)
    cap = cfg.capacity_for(api.NODE_CPU_USAGE)
    cache = MetricCache(cfg, clock=fake_clock)
    for i in range(cap + 5):
        cache.append(api.NODE_CPU_USAGE, None, float(i))
        fake_clock.advance(1)
    r = cache.aggregate(api.NODE_CPU_USAGE, window=1000, aggs=("avg", "p50", "last"))
    assert r is not None
    kept = [float(i) for i in range(5, cap + 5)]
    assert r.count == cap
    assert r["avg"] == sum(kept) / cap
    assert r["p50"] == kept[int(cap * 0.5) - 1]
    assert r["last"] == kept[-1]
    assert r.duration == cap - 1


def test_nodemetric_style_aggregate_reports_duration_for_cold_start(
    cache: MetricCache, fake_clock: FakeClock
) -> None:
    for i in range(120):  # two minutes of 1 s samples: 0, 1, ..., 119
        cache.append(api.NODE_CPU_USAGE, None, float(i))
        fake_clock.advance(1)
    agg = cache.aggregate(api.NODE_CPU_USAGE, window=300)
    assert agg is not None
    assert agg.count == 120 and agg.duration == 119.0
    assert agg.duration < 0.5 * 300  # the reporter leaves this window out
    assert set(agg.values) == {"avg", "p50", "p90", "p95", "p99"}
    assert agg["avg"] == 59.5
    assert agg["p50"] == 59.0  # int(60.0)-1 = 59 -> value 59
    assert agg["p95"] == 113.0  # int(114.0)-1 = 113
    assert agg["p99"] == 117.0  # int(118.8)-1 = 117


def test_subset_labels_merge_matching_series(cache: MetricCache) -> None:
    for alloc, v in [("usage", 1000.0), ("real-limit", 2000.0), ("request", 3000.0)]:
        cache.append(api.NODE_BE, {"be_resource": "cpu", "be_allocation": alloc}, v)
    one = cache.query(api.NODE_BE, window=5, labels={"be_resource": "cpu", "be_allocation": "request"})
    assert one is not None and (one.value, one.count) == (3000.0, 1)
    merged = cache.query(api.NODE_BE, window=5, agg="avg", labels={"be_resource": "cpu"})
    assert merged is not None and (merged.value, merged.count) == (2000.0, 3)
    assert cache.query(api.NODE_BE, window=5, labels={"be_resource": "memory"}) is None


def test_psi_series_merge_by_pod(cache: MetricCache) -> None:
    base = {"psi_resource": "cpu", "psi_precision": "10", "psi_degree": "some"}
    cache.append("container_psi", {"pod_uid": "p1", "container_id": "c1", **base}, 1.0)
    cache.append("container_psi", {"pod_uid": "p1", "container_id": "c2", **base}, 3.0)
    cache.append("container_psi", {"pod_uid": "p2", "container_id": "c3", **base}, 10.0)
    r = cache.query("container_psi", window=5, agg="avg", labels={"pod_uid": "p1"})
    assert r is not None and (r.value, r.count) == (2.0, 2)


def test_schema_is_enforced_on_append(cache: MetricCache) -> None:
    with pytest.raises(InvalidValue):
        cache.append(api.POD_CPU_USAGE, {"container_id": "x"}, 1.0)
    with pytest.raises(InvalidValue):
        cache.append(api.NODE_CPU_USAGE, {"pod_uid": "x"}, 1.0)
    with pytest.raises(InvalidValue):
        cache.append_batch(api.NODE_BE, [("just-a-value", 1.0)])
    cache.append("my_custom_metric", {"b": "2", "a": "1"}, 1.0)  # unknown kinds take any label set
    assert cache.series("my_custom_metric") == [{"a": "1", "b": "2"}]


def test_batch_keys_canonical_and_other_spellings_hit_one_series(
    cache: MetricCache, fake_clock: FakeClock
) -> None:
    key = series_key(api.NODE_BE, {"be_resource": "cpu", "be_allocation": "usage"})
    assert cache.append_batch(api.NODE_BE, [(key, 1.0)]) == 1
    fake_clock.advance(1)
    cache.append_batch(api.NODE_BE, [((("be_resource", "cpu"), ("be_allocation", "usage")), 3.0)])
    fake_clock.advance(1)
    cache.append(api.NODE_BE, {"be_allocation": "usage", "be_resource": "cpu"}, 5.0)
    cache.append_batch(api.POD_CPU_USAGE, [("uid-a", 0.5), ((("pod_uid", "uid-a"),), 1.5), ("uid-b", 9.0)])
    assert len(cache.series(api.NODE_BE)) == 1
    r = cache.query(api.NODE_BE, window=10, agg="avg")
    assert r is not None and (r.value, r.count) == (3.0, 3)
    a = cache.query(api.POD_CPU_USAGE, window=10, agg="avg", labels={"pod_uid": "uid-a"})
    assert a is not None and (a.value, a.count) == (1.0, 2)


def test_latest_returns_newest_per_series(cache: MetricCache, fake_clock: FakeClock) -> None:
    cache.append_batch(api.POD_CPU_USAGE, [("a", 1.0), ("b", 2.0)])
    fake_clock.advance(1)
    cache.append_batch(api.POD_CPU_USAGE, [("a", 3.0)])
    got = {labels["pod_uid"]: (t, v) for labels, t, v in cache.latest(api.POD_CPU_USAGE)}
    assert got == {"a": (fake_clock(), 3.0), "b": (fake_clock() - 1, 2.0)}
    assert cache.latest("nothing") == []


def test_drop_where_gc_expire(fake_clock: FakeClock) -> None:
    cache = MetricCache(MetricCacheConfig(pod_retention=300, node_retention=900), clock=fake_clock)
    base = {"psi_resource": "cpu", "psi_precision": "10", "psi_degree": "some"}
    cache.append_batch(api.POD_CPU_USAGE, [("p1", 1.0), ("p2", 2.0), ("p3", 3.0)])
    cache.append("container_psi", {"pod_uid": "p1", "container_id": "c1", **base}, 1.0)
    cache.append(api.NODE_CPU_USAGE, None, 1.0)
    assert cache.drop_where("pod_uid", "p1") == 2
    assert {s["pod_uid"] for s in cache.series(api.POD_CPU_USAGE)} == {"p2", "p3"}
    assert cache.series("container_psi") == []
    fake_clock.advance(400)
    cache.append(api.NODE_CPU_USAGE, None, 2.0)
    assert cache.gc(older_than=fake_clock() - 500) == 0
    assert cache.expire() == 2  # p2 and p3 are past the 300 s pod retention; the node series is fresh
    assert cache.metrics() == [api.NODE_CPU_USAGE]
    assert cache.gc(older_than=fake_clock() + 1) == 1
    assert cache.metrics() == []


def test_self_metrics_on_injected_registry(fake_clock: FakeClock) -> None:
    registry = CollectorRegistry()
    cache = MetricCache(clock=fake_clock, registry=registry)
    cache.append_batch(api.POD_CPU_USAGE, [("a", 1.0), ("b", 2.0)])
    fake_clock.advance(1)
    cache.append_batch(api.POD_CPU_USAGE, [("a", 1.0)])
    assert registry.get_sample_value("koordlet_metric_cache_series", {"metric": api.POD_CPU_USAGE}) == 2
    assert registry.get_sample_value("koordlet_metric_cache_samples") == 3
    assert registry.get_sample_value("koordlet_metric_cache_load_errors_total") == 0


def test_bad_window_and_aggregation(cache: MetricCache) -> None:
    cache.append(api.NODE_CPU_USAGE, None, 1.0)
    with pytest.raises(ValueError):
        cache.query(api.NODE_CPU_USAGE, window=0)
    with pytest.raises(ValueError):
        cache.aggregate(api.NODE_CPU_USAGE, window=10, aggs=("max",))


def test_concurrent_appends_and_queries(fake_clock: FakeClock) -> None:
    cache = MetricCache(clock=fake_clock)
    keys = [f"c{i}" for i in range(200)]
    ticks = 300
    errors: list[BaseException] = []
    done = threading.Event()

    def appender() -> None:
        try:
            for tick in range(ticks):
                cache.append_batch(api.CONTAINER_CPU_USAGE, [(k, float(tick)) for k in keys], t=float(tick))
        except BaseException as err:  # surfaced by the assertion below
            errors.append(err)
        finally:
            done.set()

    def reader() -> None:
        try:
            while not done.is_set():
                agg = cache.aggregate(
                    api.CONTAINER_CPU_USAGE, window=1e6, aggs=("avg", "last"), labels={"container_id": "c7"}
                )
                # Each tick lands atomically, so a reader sees exactly the values 0..n-1.
                if agg is not None:
                    assert agg["last"] == agg.count - 1
                    assert agg["avg"] == (agg.count - 1) / 2
                cache.latest(api.CONTAINER_CPU_USAGE)
                cache.series(api.CONTAINER_CPU_USAGE)
        except BaseException as err:
            errors.append(err)

    fake_clock.advance(1e5)
    threads = [
        threading.Thread(target=appender),
        threading.Thread(target=reader),
        threading.Thread(target=reader),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    agg = cache.aggregate(api.CONTAINER_CPU_USAGE, window=1e6, aggs=("count", "avg"))
    assert agg is not None
    assert agg.count == len(keys) * ticks
    assert agg["avg"] == (ticks - 1) / 2


def test_out_of_order_appends_last_is_greatest_timestamp(cache: MetricCache, fake_clock: FakeClock) -> None:
    now = fake_clock()
    cache.append(api.NODE_CPU_USAGE, None, 5.0, t=now - 1)
    cache.append(api.NODE_CPU_USAGE, None, 9.0, t=now - 3)  # a late sample from an earlier tick
    cache.append(api.NODE_CPU_USAGE, None, 1.0, t=now - 20)  # outside the window below
    agg = cache.aggregate(api.NODE_CPU_USAGE, window=10, aggs=("last", "avg", "count"))
    assert agg is not None
    assert (agg["last"], agg["avg"], agg.count, agg.duration) == (5.0, 7.0, 2, 2.0)
    assert cache.latest(api.NODE_CPU_USAGE) == [({}, now - 1, 5.0)]


def test_a_batch_with_a_few_keys_replaced_looks_up_only_those(
    cache: MetricCache, fake_clock: FakeClock
) -> None:
    """A pod replaced among a thousand: the collector's next key tuple differs in one place; the cache
    looks up the new key and the gone one only, and keeps every other series on the timeline."""
    keys = tuple(f"uid-{i}" for i in range(1000))
    for _ in range(2):
        cache.append_columns(api.POD_CPU_USAGE, keys, [1.0] * 1000)
        fake_clock.advance(1)
    kind = cache._kinds[api.POD_CPU_USAGE]
    lookups = count_series_lookups(cache)
    replaced = (*keys[:500], "uid-new", *keys[501:])
    for _ in range(2):
        cache.append_columns(api.POD_CPU_USAGE, replaced, [2.0] * 1000)
        fake_clock.advance(1)
    assert lookups.n <= 3
    assert kind.timeline.members == 1000
    assert isinstance(kind.series["uid-new"].ring, SharedRing)
    assert not isinstance(kind.series["uid-500"].ring, SharedRing)
    got = cache.query(api.POD_CPU_USAGE, window=10, agg="count", labels={"pod_uid": "uid-500"})
    assert got is not None and got.count == 2
    new = cache.query(api.POD_CPU_USAGE, window=10, agg="avg", labels={"pod_uid": "uid-new"})
    assert new is not None and (new.value, new.count) == (2.0, 2)
