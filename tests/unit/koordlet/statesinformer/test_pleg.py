"""inotify wrapper and the PLEG on a FakeHost tree (inotify works on any directory, so no real cgroups)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from koordlet import api
from koordlet.statesinformer.pleg import PLEG
from koordlet.system.host import Host
from koordlet.system.inotify import IN_CREATE, IN_DELETE, Inotify
from koordlet.testing.wakeups import stop_and_close, voluntary_switches
from koordshared.runtime.lifecycle import wait_for

UID = "00000000-0000-4000-8000-000000000001"


def test_inotify_create_delete(tmp_path: Path) -> None:
    with Inotify() as ino:
        ino.add_watch(tmp_path)
        assert ino.read(0.01) == []
        (tmp_path / "a").mkdir()
        (tmp_path / "a").rmdir()
        events = ino.read(1.0)
        assert [(e.name, bool(e.mask & IN_CREATE), bool(e.mask & IN_DELETE), e.is_dir) for e in events] == [
            ("a", True, False, True),
            ("a", False, True, True),
        ]
        assert all(e.directory == tmp_path for e in events)


def test_inotify_refuses_missing_dir_and_closes(tmp_path: Path) -> None:
    fds = Path("/proc/self/fd")
    before = set(os.listdir(fds))
    ino = Inotify()
    opened = set(os.listdir(fds)) - before
    assert len(opened) == 2  # the inotify instance and the eventfd that wakes a reader
    with pytest.raises(OSError) as err:
        ino.add_watch(tmp_path / "nope")
    assert err.value.errno == 2
    ino.close()
    assert not opened & set(os.listdir(fds)), "a descriptor is still open after close"


def test_inotify_wake_after_close_writes_to_no_reused_descriptor() -> None:
    """A component's close() can come after its reader closed the instance: the eventfd's number may
    belong to another file by then, and a wake must not write there."""
    ino = Inotify()
    ino.close()
    pipes = [os.pipe() for _ in range(4)]  # the lowest free numbers: those close released
    try:
        for r, w in pipes:
            os.set_blocking(r, False)
            os.set_blocking(w, False)
        ino.wake()
        leaked = []
        for r, _w in pipes:
            try:
                leaked.append(os.read(r, 64))
            except BlockingIOError:
                pass
        assert leaked == [], "wake() wrote to a descriptor close() had released"
    finally:
        for r, w in pipes:
            os.close(r)
            os.close(w)


def test_inotify_wake_ends_a_long_read_at_once(tmp_path: Path) -> None:
    with Inotify() as ino:
        ino.add_watch(tmp_path)
        got: list[object] = []
        reader = threading.Thread(target=lambda: got.append(ino.read(30.0)))
        reader.start()
        started = time.monotonic()
        ino.wake()
        reader.join(5)
        assert not reader.is_alive() and got == [[]] and time.monotonic() - started < 2.0
        (tmp_path / "a").mkdir()  # a wake consumed leaves later reads as they were
        assert [e.name for e in ino.read(1.0)] == ["a"]


def test_pleg_reports_pod_and_container_dirs(fake_host: Any) -> None:
    fake_host.mkcgroup(None, "kubepods/besteffort")
    fake_host.mkcgroup(None, "kubepods/burstable")
    host = Host(fake_host.paths)
    hits: list[int] = []
    pleg = PLEG(host, lambda: hits.append(1), poll=0.05)
    stop = threading.Event()
    t = threading.Thread(target=pleg.run, args=(stop,))
    t.start()
    try:
        cpu = fake_host.paths.cgroup_root / "cpu"
        # once its watches are up the PLEG asks for one refresh (dirs made before then raised no event)
        assert wait_for(lambda: len(hits) == 1, threading.Event(), timeout=3)
        (cpu / "kubepods/burstable/stray").mkdir()  # not a pod: ignored
        (cpu / f"kubepods/besteffort/pod{UID}").mkdir()
        assert wait_for(lambda: len(hits) >= 2, threading.Event(), timeout=3)
        n = len(hits)
        (cpu / f"kubepods/besteffort/pod{UID}/{'a' * 64}").mkdir()  # container inside the new pod dir
        assert wait_for(lambda: len(hits) > n, threading.Event(), timeout=3)
        host_tier = host.layout.qos_dir(api.KubeQOSClass.BESTEFFORT)
        assert host_tier == "kubepods/besteffort"
    finally:
        stop.set()
        t.join(5)
    assert not t.is_alive()


def test_pleg_sleeps_once_every_tier_is_watched_and_stops_on_close(fake_host: Any) -> None:
    # It woke every half second, with every tier watched and nothing to do.
    fake_host.mkcgroup(None, "kubepods/besteffort")
    hits: list[int] = []
    pleg = PLEG(Host(fake_host.paths), lambda: hits.append(1), poll=0.05, idle_wait=30.0)
    stop = threading.Event()
    t = threading.Thread(target=pleg.run, args=(stop,))
    t.start()
    cpu = fake_host.paths.cgroup_root / "cpu"
    try:
        assert wait_for(lambda: len(hits) == 1, threading.Event(), timeout=3)
        time.sleep(0.3)  # a missing tier is looked for every poll: the burstable one comes late
        (cpu / "kubepods/burstable").mkdir()
        time.sleep(0.3)
        (cpu / f"kubepods/burstable/pod{UID}").mkdir()
        assert wait_for(lambda: len(hits) >= 2, threading.Event(), timeout=3)
        time.sleep(0.2)
        before = voluntary_switches(t)
        time.sleep(2.0)  # the measurement window: every tier watched, nothing happens
        assert voluntary_switches(t) - before <= 1
        n = len(hits)
        (cpu / f"kubepods/besteffort/pod{UID.replace('1', '2')}").mkdir()  # events still wake it
        assert wait_for(lambda: len(hits) > n, threading.Event(), timeout=3)
    finally:
        took = stop_and_close(stop, pleg.close, t)
    assert took < 2.0


class _CountingPLEG(PLEG):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.listed: list[Path] = []

    def _watch_pods(self, ino: Inotify, tier: Path) -> set[Path]:
        self.listed.append(tier)
        return super()._watch_pods(ino, tier)


def _uid(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012d}"


def test_pleg_lists_pod_dirs_only_when_something_can_be_new(fake_host: Any) -> None:
    """Idle wake-ups do not list the pod dirs again (that cost a quarter of a core at 1000 pods); a tier
    made after start is listed once when it gets its watch, and its pods' container dirs raise events."""
    fake_host.mkcgroup(None, "kubepods/burstable")
    cpu = fake_host.paths.cgroup_root / "cpu"
    for i in range(20):
        (cpu / f"kubepods/burstable/pod{_uid(i)}").mkdir()
    host = Host(fake_host.paths)
    hits: list[int] = []
    pleg = _CountingPLEG(host, lambda: hits.append(1), poll=0.01, rescan=3600.0)
    stop = threading.Event()
    t = threading.Thread(target=pleg.run, args=(stop,))
    t.start()
    try:
        assert wait_for(lambda: len(hits) == 1, threading.Event(), timeout=3)
        first = [cpu / "kubepods", cpu / "kubepods/burstable"]  # the guaranteed tier is kubepods itself
        assert pleg.listed == first
        stop.wait(0.3)  # ~30 idle wake-ups
        assert pleg.listed == first, "idle wake-ups listed the pod dirs again"
        # every pre-existing pod dir is watched: a container dir in one raises an event
        (cpu / f"kubepods/burstable/pod{_uid(7)}/{'b' * 64}").mkdir()
        assert wait_for(lambda: len(hits) >= 2, threading.Event(), timeout=3)
        # a tier made later: pods already in it are listed once its watch is up
        (cpu / "kubepods/besteffort").mkdir()
        (cpu / f"kubepods/besteffort/pod{_uid(99)}").mkdir()
        assert wait_for(lambda: cpu / "kubepods/besteffort" in pleg.listed, threading.Event(), timeout=3)
        n = len(hits)
        (cpu / f"kubepods/besteffort/pod{_uid(99)}/{'c' * 64}").mkdir()
        assert wait_for(lambda: len(hits) > n, threading.Event(), timeout=3)
        assert pleg.scans == 1
    finally:
        stop.set()
        t.join(5)
    assert not t.is_alive()


def _refuse_watch(pleg: PLEG, target: Path, refuse: Callable[[], bool]) -> list[Path]:
    """Make ``pleg`` fail to watch ``target`` while ``refuse()`` holds; the refusals, as they come."""
    real_watch = pleg._watch
    refused: list[Path] = []

    def watch(ino: Inotify, path: Path) -> bool:
        if path == target and refuse():
            refused.append(path)
            return False
        return real_watch(ino, path)

    pleg._watch = watch  # type: ignore[method-assign]
    return refused


@contextlib.contextmanager
def _running(pleg: PLEG) -> Iterator[None]:
    stop = threading.Event()
    t = threading.Thread(target=pleg.run, args=(stop,))
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(5)
    assert not t.is_alive()


def test_pleg_rescan_watches_pod_dirs_it_missed(fake_host: Any) -> None:
    """The periodic rescan is the safety net for a pod dir whose watch was never added."""
    fake_host.mkcgroup(None, "kubepods/besteffort")
    cpu = fake_host.paths.cgroup_root / "cpu"
    host = Host(fake_host.paths)
    hits: list[int] = []
    pleg = _CountingPLEG(host, lambda: hits.append(1), poll=0.01, rescan=0.2)
    missed = cpu / f"kubepods/besteffort/pod{_uid(5)}"
    # once, as if the dir vanished and came back between event and watch
    refused = _refuse_watch(pleg, missed, lambda: not refused)
    with _running(pleg):
        assert wait_for(lambda: len(hits) == 1, threading.Event(), timeout=3)
        missed.mkdir()
        assert wait_for(lambda: bool(refused) and pleg.scans >= 2, threading.Event(), timeout=3)
        n = len(hits)
        (missed / ("d" * 64)).mkdir()
        assert wait_for(lambda: len(hits) > n, threading.Event(), timeout=3)


def test_pleg_rescan_reports_a_pod_dir_whose_containers_came_while_unwatched(fake_host: Any) -> None:
    """A container made in a pod dir before the rescan watched it raised no event: the rescan that adds
    the watch reports that pod dir."""
    fake_host.mkcgroup(None, "kubepods/besteffort")
    fake_host.mkcgroup(None, "kubepods/burstable")  # every tier watched: reports name their dirs
    cpu = fake_host.paths.cgroup_root / "cpu"
    host = Host(fake_host.paths)
    seen: list[frozenset[Path] | None] = []
    pleg = _CountingPLEG(host, lambda: None, poll=0.01, rescan=0.3, on_dirs=seen.append)
    missed = cpu / f"kubepods/besteffort/pod{_uid(6)}"
    refused = _refuse_watch(pleg, missed, lambda: not (missed / ("e" * 64)).exists())
    with _running(pleg):
        assert wait_for(lambda: len(seen) == 1, threading.Event(), timeout=3)
        missed.mkdir()
        assert wait_for(lambda: bool(refused) and len(seen) == 2, threading.Event(), timeout=3)
        (missed / ("e" * 64)).mkdir()  # no watch on missed: this raises no event
        assert wait_for(
            lambda: any(d is not None and missed in d for d in seen[2:]), threading.Event(), timeout=5
        ), seen


def test_no_inotify_instance_is_a_warning_not_a_dead_thread(
    fake_host: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """fs.inotify.max_user_instances reached: the PLEG says so and returns (a raising thread would stop
    the agent); discovery, never told which dirs changed, keeps listing the whole tree."""

    def no_instance() -> None:
        raise OSError(24, "Too many open files", "inotify_init1")

    monkeypatch.setattr("koordlet.system.inotify.Inotify", no_instance)
    told: list[frozenset[Path] | None] = []
    pleg = PLEG(Host(fake_host.paths), lambda: None, on_dirs=told.append)
    pleg.run(threading.Event())
    assert told == [] and any("no inotify" in r.getMessage() for r in caplog.records)
