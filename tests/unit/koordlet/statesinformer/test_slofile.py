"""The standalone NodeSLO file: looked at when its directory changes, not on a timer."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from koordlet.statesinformer.nodeslo import NodeSLOStore
from koordlet.statesinformer.slofile import NodeSLOFile
from koordlet.testing import wait_until
from koordlet.testing.wakeups import stop_and_close


def _spec(percent: int) -> str:
    return json.dumps({"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": percent}})


def _threshold(store: NodeSLOStore) -> int:
    return store.current().resource_used_threshold_with_be.cpu_suppress_threshold_percent


def test_the_file_is_read_on_a_change_and_the_loop_sleeps_in_between(tmp_path: Path) -> None:
    """It was checked every two seconds (poll here: 50 ms) whether or not anything changed."""
    path = tmp_path / "slo" / "nodeslo.json"
    store = NodeSLOStore()
    slo_file = NodeSLOFile(str(path), store)
    stop = threading.Event()
    thread = threading.Thread(target=slo_file.run, args=(stop, 0.05), name="slo-file")
    thread.start()
    try:
        # no directory yet: polled
        assert wait_until(lambda: slo_file.wakeups >= 3, 5)
        path.parent.mkdir()
        path.write_text(_spec(40))
        assert wait_until(lambda: _threshold(store) == 40, 5)
        time.sleep(0.2)  # the directory is watched by now
        before = slo_file.wakeups
        time.sleep(1.0)  # twenty polls' worth: nothing changed, nothing wakes it
        assert slo_file.wakeups == before
        # a ConfigMap-style update: a new file renamed over the old one
        tmp = path.with_name(".new")
        tmp.write_text(_spec(30))
        tmp.rename(path)
        assert wait_until(lambda: _threshold(store) == 30, 5)
        path.unlink()  # gone: the defaults
        assert wait_until(
            lambda: (
                _threshold(store)
                == NodeSLOStore().current().resource_used_threshold_with_be.cpu_suppress_threshold_percent
            ),
            5,
        )
    finally:
        took = stop_and_close(stop, slo_file.close, thread)
    assert took < 2.0


def test_without_a_file_there_is_no_loop(tmp_path: Path) -> None:
    slo_file = NodeSLOFile("", NodeSLOStore())
    started = time.monotonic()
    slo_file.run(threading.Event(), 0.05)
    assert time.monotonic() - started < 1.0 and slo_file.wakeups == 0


def test_without_inotify_the_file_is_polled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent out of inotify instances polls (a raised OSError would have stopped the agent)."""
    from koordlet.system import inotify

    def no_inotify() -> None:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(inotify, "Inotify", no_inotify)
    path = tmp_path / "nodeslo.json"
    store = NodeSLOStore()
    slo_file = NodeSLOFile(str(path), store)
    stop = threading.Event()
    thread = threading.Thread(target=slo_file.run, args=(stop, 0.05), name="slo-file")
    thread.start()
    try:
        path.write_text(_spec(35))
        assert wait_until(lambda: _threshold(store) == 35, 5)
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()
