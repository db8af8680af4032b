"""inotify wrapper and the PLEG on a FakeHost tree (inotify works on any directory, so no real cgroups)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from koordlet import api
from koordlet.lifecycle import wait_for
from koordlet.statesinformer.pleg import PLEG
from koordlet.system.host import Host
from koordlet.system.inotify import IN_CREATE, IN_DELETE, Inotify

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
    assert len(opened) == 1
    with pytest.raises(OSError) as err:
        ino.add_watch(tmp_path / "nope")
    assert err.value.errno == 2
    ino.close()
    assert not opened & set(os.listdir(fds)), "the inotify descriptor is still open after close"


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
