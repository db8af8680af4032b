"""DeltaTracker rules (first-round skip, resets, clock steps) and the descriptor cache."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from koordlet.metricsadvisor.fdcache import FdCache
from koordlet.metricsadvisor.framework import DeltaTracker, SharedState


def test_first_reading_only_sets_the_baseline() -> None:
    tracker = DeltaTracker(1.0)
    assert tracker.update("a", 10.0, (100,)) is None
    assert tracker.update("a", 11.0, (350,)) == (1.0, (250,))


def test_counter_going_backwards_is_discarded_and_rebaselined() -> None:
    tracker = DeltaTracker(1.0)
    tracker.update("a", 10.0, (1000,))
    assert tracker.update("a", 11.0, (5,)) is None
    assert tracker.take_rejections() == (1, 0)
    # the reset value became the new baseline
    assert tracker.update("a", 12.0, (25,)) == (1.0, (20,))


def test_any_of_several_counters_resetting_rejects_all() -> None:
    tracker = DeltaTracker(1.0)
    tracker.update("a", 0.5, (10, 10))
    assert tracker.update("a", 1.5, (20, 5)) is None
    assert tracker.resets == 1


def test_time_steps_outside_0_and_ten_intervals_are_rejected() -> None:
    tracker = DeltaTracker(2.0)
    tracker.update("a", 100.0, (0,))
    assert tracker.update("a", 100.0, (10,)) is None  # dt = 0
    assert tracker.update("a", 99.0, (20,)) is None  # clock went back
    assert tracker.update("a", 99.0 + 20.5, (30,)) is None  # more than 10 x 2 s
    assert tracker.take_rejections() == (0, 3)
    assert tracker.update("a", 119.5 + 20.0, (50,)) == (20.0, (20,))


def test_retain_and_forget_drop_baselines() -> None:
    tracker = DeltaTracker(1.0)
    for key in ("a", "b", "c"):
        tracker.update(key, 1.0, (1,))
    tracker.retain(["a", "b"])
    tracker.forget("a")
    assert len(tracker) == 1
    assert tracker.update("a", 2.0, (5,)) is None


def test_shared_state_keeps_the_latest_stamp() -> None:
    shared = SharedState()
    shared.set("x", 1.0, 2.0)
    shared.set("x", 3.0, 4.0)
    got = shared.get("x")
    assert got is not None and (got.t, got.value) == (3.0, 4.0)
    shared.clear("x")
    assert shared.get("x") is None


def test_fdcache_reads_current_content_through_a_held_descriptor(tmp_path: Path) -> None:
    f = tmp_path / "value"
    f.write_text("1\n")
    fds = FdCache()
    assert fds.read(f) == b"1\n"
    # cgroupfs rewrites in place; emulate with an in-place write keeping the inode
    fd = os.open(f, os.O_WRONLY)
    os.write(fd, b"2\n")
    os.close(fd)
    assert fds.read(f) == b"2\n"
    assert fds.open_fds() == 1
    fds.close()
    assert fds.open_fds() == 0


def test_fdcache_gone_path_reads_none_and_holds_nothing(tmp_path: Path) -> None:
    d = tmp_path / "cg"
    d.mkdir()
    fds = FdCache()
    assert fds.read(d / "missing") is None
    assert fds.open_fds() == 0
    (d / "f").write_text("x")
    fds.read(d / "f")
    shutil.rmtree(d)
    assert fds.retain([]) == 1
    assert fds.open_fds() == 0


def test_fdcache_prefix_mode_accepts_a_full_buffer(tmp_path: Path) -> None:
    f = tmp_path / "big"
    f.write_text("cpu 1 2 3\n" + "x" * 5000)
    fds = FdCache(cap=64)
    data = fds.read(f, prefix=True)
    assert data is not None and data.startswith(b"cpu 1 2 3\n")
    try:
        fds.read(f)
    except OSError as err:
        assert err.errno == 75  # EOVERFLOW: a silently cut file must not pass as whole
    else:
        raise AssertionError("full buffer accepted without prefix=True")
    fds.close()


def test_fdcache_after_close_reads_without_keeping_descriptors(tmp_path: Path) -> None:
    f = tmp_path / "v"
    f.write_text("7\n")
    fds = FdCache()
    fds.read(f)
    fds.close()
    assert fds.read(f) == b"7\n"  # a collector finishing its last sweep during shutdown
    assert fds.open_fds() == 0
    assert fds.read(tmp_path / "gone") is None
