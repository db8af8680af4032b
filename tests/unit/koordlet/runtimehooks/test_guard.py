"""The runtime hooks' guard: a write by someone else to a watched pod's file asks for a verifying pass; in
between it sleeps, and closing it ends its thread at once (inotify works on any directory)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from koordlet.runtimehooks.guard import Guard
from koordlet.system import cgroups
from koordlet.system.cgroups import CgroupMode
from koordlet.system.paths import HostPaths
from koordlet.testing import wait_until
from koordlet.testing.wakeups import stop_and_close, voluntary_switches

UID = "00000000-0000-4000-8000-000000000001"
POD_DIR = "kubepods/burstable/pod" + UID


def test_the_guard_sleeps_reports_a_foreign_write_and_stops_on_close(tmp_path: Path) -> None:
    for sub in ("cpu", "cpuset", "memory"):
        (tmp_path / sub / POD_DIR).mkdir(parents=True)
    changed: list[set[str]] = []
    guard = Guard(HostPaths(cgroup_root=tmp_path), CgroupMode.V1, changed.append)
    guard.watch({UID: [POD_DIR]})
    stop = threading.Event()
    thread = threading.Thread(target=guard.run, args=(stop,), name="guard")
    thread.start()
    try:
        assert wait_until(lambda: guard.events == 0 and thread.native_id is not None, 5)
        time.sleep(0.2)  # let it reach its wait
        before = voluntary_switches(thread)
        time.sleep(2.0)  # the measurement window: nothing is due, it must not wake
        assert voluntary_switches(thread) - before <= 1
        (tmp_path / "cpu" / POD_DIR / "cpu.shares").write_text("2")
        assert wait_until(lambda: changed == [{UID}], 5)
        (tmp_path / "cpu" / POD_DIR / "unrelated").write_text("x")  # not a hooks' file
        time.sleep(0.3)
        assert changed == [{UID}]
    finally:
        took = stop_and_close(stop, guard.close, thread)
    assert took < 2.0


def test_the_same_dirs_again_cost_nothing_and_a_dropped_watch_is_added_again(tmp_path: Path) -> None:
    for sub in ("cpu", "cpuset", "memory"):
        (tmp_path / sub / POD_DIR).mkdir(parents=True)
    changed: list[set[str]] = []
    guard = Guard(HostPaths(cgroup_root=tmp_path), CgroupMode.V1, changed.append)
    stop = threading.Event()
    thread = threading.Thread(target=guard.run, args=(stop,), name="guard")
    thread.start()
    try:
        assert wait_until(lambda: guard._ino is not None, 5)
        guard.watch({UID: [POD_DIR]})
        owner = guard._owner
        guard.watch({UID: [POD_DIR]})
        assert guard._owner is owner  # nothing rebuilt: every dir asked for is watched already
        # the pod's cpu dir removed and made again (the kernel dropped its watch): watched again
        (tmp_path / "cpu" / POD_DIR).rmdir()
        assert wait_until(lambda: len(guard._ino.watched) == 2 if guard._ino else False, 5)
        (tmp_path / "cpu" / POD_DIR).mkdir()
        guard.watch({UID: [POD_DIR]})
        assert len(guard._owner) == 3
        (tmp_path / "cpu" / POD_DIR / "cpu.shares").write_text("2")
        assert wait_until(lambda: changed == [{UID}], 5)
    finally:
        stop_and_close(stop, guard.close, thread)


def test_a_pod_counts_as_guarded_only_while_each_of_its_dirs_is_watched(tmp_path: Path) -> None:
    other = "00000000-0000-4000-8000-000000000002"
    other_dir = "kubepods/burstable/pod" + other
    for sub in ("cpu", "cpuset", "memory"):
        (tmp_path / sub / POD_DIR).mkdir(parents=True)
    (tmp_path / "cpu" / other_dir).mkdir(parents=True)  # its cpuset and memory dirs are not there
    guard = Guard(HostPaths(cgroup_root=tmp_path), CgroupMode.V1, lambda _uids: None)
    assert guard.guarded() == frozenset()
    stop = threading.Event()
    thread = threading.Thread(target=guard.run, args=(stop,), name="guard")
    thread.start()
    try:
        assert wait_until(lambda: guard._ino is not None, 5)
        guard.watch({UID: [POD_DIR], other: [other_dir]})
        assert guard.guarded() == {UID}
        (tmp_path / "memory" / POD_DIR).rmdir()  # the kernel drops that watch
        assert wait_until(lambda: guard.guarded() == frozenset(), 5)
    finally:
        stop_and_close(stop, guard.close, thread)


def test_a_pod_coming_builds_only_its_own_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pass that changed a pod asked the guard again for every pod, and it built and checked every
    pod's paths (six per pod on v1: a thousand pods' worth per pod coming or going). A pod's paths are
    built once while its dirs stay the same."""
    uids = [f"00000000-0000-4000-8000-{i:012d}" for i in range(10, 20)]
    dirs = {uid: ["kubepods/burstable/pod" + uid] for uid in uids}
    for d in dirs.values():
        for sub in ("cpu", "cpuset", "memory"):
            (tmp_path / sub / d[0]).mkdir(parents=True)
    built: list[str] = []
    real = cgroups.cgroup_dir_path

    def counting(*a: Any, **kw: Any) -> Path:
        built.append(a[-1])
        return real(*a, **kw)

    monkeypatch.setattr(cgroups, "cgroup_dir_path", counting)
    guard = Guard(HostPaths(cgroup_root=tmp_path), CgroupMode.V1, lambda _uids: None)
    stop = threading.Event()
    thread = threading.Thread(target=guard.run, args=(stop,), name="guard")
    thread.start()
    try:
        assert wait_until(lambda: guard._ino is not None, 5)
        guard.watch(dirs)
        assert len(built) == 30
        built.clear()
        new = "00000000-0000-4000-8000-000000000099"
        for sub in ("cpu", "cpuset", "memory"):
            (tmp_path / sub / f"kubepods/burstable/pod{new}").mkdir(parents=True)
        guard.watch({**{uid: dirs[uid] for uid in uids[1:]}, new: [f"kubepods/burstable/pod{new}"]})
        assert built == [f"kubepods/burstable/pod{new}"] * 3  # the new pod's three, nobody else's
        assert guard.guarded() == {*uids[1:], new}
    finally:
        stop_and_close(stop, guard.close, thread)


def test_no_inotify_instance_leaves_every_pod_unguarded_and_the_agent_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """fs.inotify.max_user_instances reached: the guard says so and returns (a raising thread would stop
    the agent); no pod counts as guarded, so the hooks' passes check them all."""

    def no_instance() -> None:
        raise OSError(24, "Too many open files", "inotify_init1")

    monkeypatch.setattr("koordlet.system.inotify.Inotify", no_instance)
    (tmp_path / "cpu/kubepods/poda").mkdir(parents=True)
    guard = Guard(HostPaths(cgroup_root=tmp_path), CgroupMode.V1, lambda _uids: None)
    guard.watch({"a": ("kubepods/poda",)})
    guard.run(threading.Event())
    assert guard.guarded() == frozenset()
    assert any("no inotify" in r.getMessage() for r in caplog.records)
