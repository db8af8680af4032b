"""Checkpoints: round trip across a 'reboot', retention and clock checks on load, corruption, size bound."""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
import zlib
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.metriccache import MetricCache, MetricCacheConfig
from koordlet.metriccache.checkpoint import FILE_NAME, MAGIC
from koordlet.system import atomicfile
from koordlet.testing import FakeClock


def _cache(path: Path, clock: FakeClock, **cfg: Any) -> MetricCache:
    config = MetricCacheConfig(tsdb_path=path, **cfg)
    return MetricCache(config, clock=clock, wall_clock=clock.wall)


def _fill(cache: MetricCache, clock: FakeClock, seconds: int, pods: int = 3) -> None:
    for i in range(seconds):
        cache.append(api.NODE_CPU_USAGE, None, float(i))
        cache.append_batch(api.POD_CPU_USAGE, [(f"pod-{p}", float(i * 10 + p)) for p in range(pods)])
        clock.advance(1)


def _reboot(clock: FakeClock, downtime: float) -> FakeClock:
    """A clock of a new boot: monotonic time restarts near zero, wall time has moved on."""
    return FakeClock(start=3.0, wall_start=clock.wall() + downtime)


def test_round_trip_across_a_reboot(tmp_path: Path) -> None:
    clock = FakeClock(start=50_000.0)
    cache = _cache(tmp_path, clock)
    _fill(cache, clock, 120)
    before = cache.aggregate(api.NODE_CPU_USAGE, window=300)
    written = cache.checkpoint()
    assert written == (tmp_path / FILE_NAME).stat().st_size > 120 * 4 * 16
    assert not list(tmp_path.glob("*.tmp.*"))

    later = _reboot(clock, downtime=0.0)
    restored = _cache(tmp_path, later)
    assert restored.load() == 4
    after = restored.aggregate(api.NODE_CPU_USAGE, window=300)
    assert before is not None and after is not None
    assert after.values == before.values and after.count == before.count == 120
    assert after.duration == pytest.approx(before.duration)
    pod = restored.query(api.POD_CPU_USAGE, window=300, agg="last", labels={"pod_uid": "pod-2"})
    assert pod is not None and pod.value == 1192.0
    # New samples continue the restored series, on the new boot's clock.
    restored.append(api.NODE_CPU_USAGE, None, 1000.0)
    last = restored.query(api.NODE_CPU_USAGE, window=1.5)
    assert last is not None and (last.value, last.count) == (1000.0, 2)  # restored 119, new 1000


def test_downtime_shifts_windows_and_retention_drops_old_samples(tmp_path: Path) -> None:
    clock = FakeClock()
    cache = _cache(tmp_path, clock)
    _fill(cache, clock, 100)
    cache.checkpoint()
    # 550 s later: pod samples (600 s retention) from t < 50 s after start have expired, node ones kept.
    later = _reboot(clock, downtime=550.0)
    restored = _cache(tmp_path, later)
    restored.load()
    node = restored.aggregate(api.NODE_CPU_USAGE, window=1800, aggs=("count", "avg"))
    assert node is not None and node.count == 100
    pod = restored.aggregate(api.POD_CPU_USAGE, window=1800, aggs=("count",), labels={"pod_uid": "pod-0"})
    assert pod is not None and pod.count == 50  # samples 50..99 are within 600 s of the new "now"
    # The 5-minute window now only reaches back to 300 s before the restart moment, i.e. 250 s of downtime.
    assert restored.query(api.NODE_CPU_USAGE, window=300) is None
    recent = restored.query(api.NODE_CPU_USAGE, window=600, agg="count")
    assert recent is not None and recent.value == 50


def test_samples_from_the_future_are_dropped(tmp_path: Path) -> None:
    clock = FakeClock()
    cache = _cache(tmp_path, clock)
    _fill(cache, clock, 10)
    cache.checkpoint()
    stepped_back = FakeClock(start=3.0, wall_start=clock.wall() - 5.0)  # wall clock stepped back 5 s
    restored = _cache(tmp_path, stepped_back)
    restored.load()
    node = restored.aggregate(api.NODE_CPU_USAGE, window=100, aggs=("count", "last"))
    assert node is not None
    assert node.count == 6 and node["last"] == 5.0  # samples 6..9 would lie after "now"


def _corrupt_variants(good: bytes) -> dict[str, bytes]:
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0x40
    wrong_version = bytearray(good)
    struct.pack_into("<H", wrong_version, len(MAGIC), 99)
    return {
        "garbage": b"this is not a checkpoint at all" * 10,
        "empty": b"",
        "truncated": good[: len(good) - 37],
        "header-only": good[:12],
        "bit-flip": bytes(flipped),
        "wrong-version": bytes(wrong_version),
    }


@pytest.mark.parametrize(
    "variant", ["garbage", "empty", "truncated", "header-only", "bit-flip", "wrong-version"]
)
def test_bad_file_is_moved_aside_and_cache_starts_empty(
    tmp_path: Path, variant: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    cache = _cache(tmp_path, clock)
    _fill(cache, clock, 20)
    cache.checkpoint()
    path = tmp_path / FILE_NAME
    path.write_bytes(_corrupt_variants(path.read_bytes())[variant])

    registry = CollectorRegistry()
    fresh = MetricCache(
        MetricCacheConfig(tsdb_path=tmp_path), clock=clock, wall_clock=clock.wall, registry=registry
    )
    with caplog.at_level(logging.WARNING, logger="koordlet.metriccache"):
        assert fresh.load() == 0
    assert any("cannot load" in r.getMessage() for r in caplog.records)
    assert fresh.metrics() == []
    assert not path.exists()
    assert (tmp_path / (FILE_NAME + ".corrupt")).exists()
    assert registry.get_sample_value("koordlet_metric_cache_load_errors_total") == 1
    # ...and the cache keeps working and persisting.
    fresh.append(api.NODE_CPU_USAGE, None, 1.0)
    assert fresh.checkpoint() > 0
    again = _cache(tmp_path, clock)
    assert again.load() == 1


def test_missing_file_and_no_path(tmp_path: Path) -> None:
    clock = FakeClock()
    assert _cache(tmp_path / "absent", clock).load() == 0
    memory_only = MetricCache(clock=clock)
    memory_only.append(api.NODE_CPU_USAGE, None, 1.0)
    assert memory_only.checkpoint() == 0
    assert memory_only.load() == 0


def test_stale_temp_from_a_killed_writer_is_removed(tmp_path: Path) -> None:
    clock = FakeClock()
    cache = _cache(tmp_path, clock)
    _fill(cache, clock, 5)
    cache.checkpoint()
    stale = tmp_path / f"{FILE_NAME}.tmp.12345"
    stale.write_bytes(b"half a checkpoint")
    assert _cache(tmp_path, clock).load() == 4
    assert not stale.exists()


def test_size_bound_trims_pod_samples_first_then_oldest_node(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    unbounded = _cache(tmp_path / "full", clock)
    _fill(unbounded, clock, 200, pods=20)
    full_size = unbounded.checkpoint()

    limit = full_size // 2
    bounded = _cache(tmp_path / "bounded", clock, tsdb_max_bytes=limit)
    _copy_history(unbounded, bounded)
    with caplog.at_level(logging.WARNING, logger="koordlet.metriccache"):
        size = bounded.checkpoint()
    assert size <= limit
    assert (tmp_path / "bounded" / FILE_NAME).stat().st_size == size
    assert any("tsdb-max-bytes" in r.getMessage() for r in caplog.records)
    assert bounded.stats().trimmed_samples > 0

    restored = _cache(tmp_path / "bounded", clock)
    restored.load()
    node = restored.aggregate(api.NODE_CPU_USAGE, window=1800, aggs=("count",))
    assert node is not None and node.count == 200  # node history untouched
    pods = restored.aggregate(api.POD_CPU_USAGE, window=1800, aggs=("count",), labels={"pod_uid": "pod-0"})
    assert pods is not None and 0 < pods.count < 200
    newest = restored.query(api.POD_CPU_USAGE, window=2, labels={"pod_uid": "pod-0"})
    assert newest is not None and newest.value == 1990.0  # the newest samples are the ones kept

    # A bound below the node history alone trims node samples too, oldest first.
    tiny = _cache(tmp_path / "tiny", clock, tsdb_max_bytes=2000)
    _copy_history(unbounded, tiny)
    assert tiny.checkpoint() <= 2000
    t = _cache(tmp_path / "tiny", clock)
    t.load()
    assert t.series(api.POD_CPU_USAGE) == []
    node = t.aggregate(api.NODE_CPU_USAGE, window=1800, aggs=("count", "last"))
    assert node is not None and 0 < node.count < 200 and node["last"] == 199.0


def _copy_history(src: MetricCache, dst: MetricCache) -> None:
    """Give ``dst`` exactly ``src``'s history, through an unbounded checkpoint of ``src``."""
    assert src.config.tsdb_path is not None and dst.config.tsdb_path is not None
    os.makedirs(dst.config.tsdb_path, exist_ok=True)
    src.checkpoint()
    (dst.config.tsdb_path / FILE_NAME).write_bytes((src.config.tsdb_path / FILE_NAME).read_bytes())
    assert dst.load() == len(src.series(api.POD_CPU_USAGE)) + 1


def test_checkpoint_failure_is_counted_and_the_loop_survives(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    clock = FakeClock()
    cache = _cache(blocker, clock, checkpoint_interval=0.01)
    cache.append(api.NODE_CPU_USAGE, None, 1.0)
    with pytest.raises(OSError):
        cache.checkpoint()
    stop = threading.Event()
    thread = cache.run(stop)
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert cache.stats().checkpoint_errors >= 2


def test_run_checkpoints_periodically_and_at_stop(tmp_path: Path) -> None:
    clock = FakeClock()
    cache = _cache(tmp_path, clock, checkpoint_interval=0.02)
    cache.append(api.NODE_CPU_USAGE, None, 1.0)
    stop = threading.Event()
    thread = cache.run(stop)
    waiter = threading.Event()
    for _ in range(500):  # up to 10 s for the first periodic checkpoint
        if cache.stats().checkpoints >= 2:
            break
        waiter.wait(0.02)
    assert cache.stats().checkpoints >= 2
    cache.append(api.NODE_CPU_USAGE, None, 2.0)
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive()
    restored = _cache(tmp_path, clock)
    restored.load()
    r = restored.query(api.NODE_CPU_USAGE, window=10, agg="count")
    assert r is not None and r.value == 2  # the final checkpoint at stop has the last append


class _CountingStop:
    """A stop event that records every wait and is set after ``waits`` of them."""

    def __init__(self, waits: int) -> None:
        self.left = waits
        self.delays: list[float] = []

    def wait(self, timeout: float) -> bool:
        self.delays.append(timeout)
        self.left -= 1
        return self.left < 0


def test_a_young_cache_checkpoints_early_then_at_doubling_intervals(tmp_path: Path) -> None:
    # A SIGKILL before the first 30 s checkpoint once lost all history; the schedule bounds the loss by
    # half the cache's age (plus the first delay) and by the interval.
    clock = FakeClock()
    cache = _cache(tmp_path, clock)
    cache.append(api.NODE_CPU_USAGE, None, 1.0)
    stop = _CountingStop(waits=7)
    cache.run_loop(stop)  # type: ignore[arg-type]
    assert stop.delays == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0]
    assert cache.stats().checkpoints == 8  # seven periodic ones and the one at stop
    with pytest.raises(Exception, match="first checkpoint delay"):
        MetricCacheConfig(first_checkpoint_delay=0)


def _handmade(meta: dict[str, Any], data: bytes = b"") -> bytes:
    """A checkpoint with a valid header and checksum around arbitrary metadata."""
    body = json.dumps(meta).encode()
    head = struct.pack("<4sHHIQ", MAGIC, 1, 0, len(body), len(data)) + body + data
    return head + struct.pack("<I", zlib.crc32(head))


@pytest.mark.parametrize(
    "meta",
    [
        {"saved_at": 1.0, "kv": {}, "series": [["node_cpu_usage", {}, "3"]]},
        {"saved_at": 1.0, "series": {}},
        {"saved_at": "soon", "kv": {}, "series": []},
        {"kv": {}, "series": []},
        {"saved_at": 1.0, "kv": {}, "series": [["node_cpu_usage", {}]]},
        {"saved_at": 1.0, "kv": {}, "series": [["node_cpu_usage", {}, 5]]},
    ],
)
def test_checksummed_but_nonsensical_metadata_is_rejected(tmp_path: Path, meta: dict[str, Any]) -> None:
    (tmp_path / FILE_NAME).write_bytes(_handmade(meta))
    cache = _cache(tmp_path, FakeClock())
    assert cache.load() == 0
    assert cache.stats().load_errors == 1
    assert (tmp_path / (FILE_NAME + ".corrupt")).exists()


def test_series_that_no_longer_fit_the_schema_are_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    t = clock.wall() - 1.0
    good = struct.pack("<2d", t, 0.5)
    meta = {
        "saved_at": clock.wall(),
        "kv": {},
        "series": [["pod_cpu_usage", {"container_id": "c"}, 1], ["pod_cpu_usage", {"pod_uid": "p"}, 1]],
    }
    (tmp_path / FILE_NAME).write_bytes(_handmade(meta, good + good))
    cache = _cache(tmp_path, clock)
    with caplog.at_level(logging.WARNING, logger="koordlet.metriccache"):
        assert cache.load() == 1
    assert any("no longer fit" in r.getMessage() for r in caplog.records)
    assert cache.series(api.POD_CPU_USAGE) == [{"pod_uid": "p"}]
    r = cache.query(api.POD_CPU_USAGE, window=5)
    assert r is not None and r.value == 0.5


def test_failed_write_keeps_the_previous_checkpoint(tmp_path: Path) -> None:
    clock = FakeClock()
    cache = _cache(tmp_path, clock)
    _fill(cache, clock, 10)
    cache.checkpoint()
    before = (tmp_path / FILE_NAME).read_bytes()

    def broken() -> Iterator[bytes]:
        yield b"KMC\x01 partial"
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        atomicfile.write_atomic(tmp_path / FILE_NAME, broken())
    assert (tmp_path / FILE_NAME).read_bytes() == before
    assert not list(tmp_path.glob("*.tmp.*"))


def test_a_version_1_checkpoint_still_loads(tmp_path: Path) -> None:
    """Version 2 writes the description after the data (a checkpoint streams out series by series);
    a file an earlier agent wrote (version 1: description first) is read back as before."""
    clock = FakeClock()
    saved_at = clock.wall() - 5
    ts = array("d", [saved_at - 2, saved_at - 1])
    vs = array("d", [0.5, 0.75])
    meta = {"saved_at": saved_at, "series": [["node_cpu_usage", {}, 2]]}
    (tmp_path / FILE_NAME).write_bytes(_handmade(meta, ts.tobytes() + vs.tobytes()))
    cache = _cache(tmp_path, clock)
    assert cache.load() == 1
    got = cache.query(api.NODE_CPU_USAGE, window=60, agg="avg")
    assert got is not None and (got.value, got.count) == (0.625, 2)
    cache.checkpoint()  # and it is rewritten as version 2, which loads too
    assert struct.unpack_from("<H", (tmp_path / FILE_NAME).read_bytes(), len(MAGIC))[0] == 2
    assert _cache(tmp_path, clock).load() == 1
