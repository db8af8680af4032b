"""resctrl schemata and tasks writes through the executor, on a FakeHost resctrl tree."""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any

from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.system import native
from koordlet.testing import FakeClock
from tests.unit.koordlet.resourceexecutor.conftest import RecordingWriter


def test_schemata_written_then_cached_and_repaired(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], fake_clock: FakeClock
) -> None:
    fake_host.make_resctrl(cbm_mask=0x7FF, cache_ids=(0, 1))
    fake_host.write("sys/fs/resctrl/BE/schemata", "L3:0=7ff;1=7ff\nMB:0=100;1=100\n")
    ex = make_executor()
    res = ex.resctrl.update_schemata("BE", "L3:0=f;1=f\n", owner="RdtResctrl", reason="be llc")
    assert res.written
    assert fake_host.read("sys/fs/resctrl/BE/schemata") == "L3:0=f;1=f\n"
    assert ex.resctrl.update_schemata("BE", "L3:0=f;1=f\n", owner="RdtResctrl").skipped == "unchanged"
    event = ex.events()[-1]
    assert (event["resource"], event["after"], event["owner"]) == ("schemata", "L3:0=f;1=f", "RdtResctrl")
    assert "L3:0=7ff;1=7ff" in str(event["before"])
    # the kernel shows every resource in a read; equal managed domains are "unchanged"
    fake_host.write("sys/fs/resctrl/BE/schemata", "L3:0=f;1=f\nMB:0=100;1=100\n")
    fake_clock.advance(61)
    assert [r.skipped for r in ex.reconcile_owned()] == ["unchanged"]
    fake_host.write("sys/fs/resctrl/BE/schemata", "L3:0=7ff;1=f\nMB:0=100;1=100\n")
    fake_clock.advance(61)
    assert [r.written for r in ex.reconcile_owned()] == [True]
    assert fake_host.read("sys/fs/resctrl/BE/schemata") == "L3:0=f;1=f\n"
    ex.release("RdtResctrl")
    fake_clock.advance(61)
    assert ex.reconcile_owned() == []


def test_schemata_failure_carries_last_cmd_status(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor]
) -> None:
    fake_host.make_resctrl()
    fake_host.write("sys/fs/resctrl/info/last_cmd_status", "Mask out of range\n")
    fake_host.write("sys/fs/resctrl/LS/schemata", "L3:0=7ff\n")
    ex = make_executor()
    # the real helper, aimed at a path whose write fails (EISDIR here; the kernel would say EINVAL)
    a_dir = fake_host.path("adir")
    a_dir.mkdir()
    ex.resctrl.schemata_writer = lambda path, text, status: native.write_schemata(a_dir, text, status)
    res = ex.resctrl.update_schemata("LS", "L3:0=1\n", owner="RdtResctrl")
    assert not res.ok
    assert "Mask out of range" in res.error and "LS/schemata" in res.error
    assert f"errno {errno.EISDIR}" in res.error


def test_schemata_refuses_bad_text_and_bad_group(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor]
) -> None:
    fake_host.make_resctrl()
    before = fake_host.read("sys/fs/resctrl/schemata")
    ex = make_executor()
    assert "refused" in ex.resctrl.update_schemata("", "L3:0=xyz\n", owner="r").error
    assert "refused" in ex.resctrl.update_schemata("../etc", "L3:0=f\n", owner="r").error
    assert "refused" in ex.resctrl.update_schemata("", "L2:0=f\n", owner="r").error
    assert fake_host.read("sys/fs/resctrl/schemata") == before
    assert ex.resctrl.update_schemata("koordlet-gone", "L3:0=f\n", owner="r").skipped == "gone"


def test_tasks_appends_only_missing_tids_one_write_each(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], writer: RecordingWriter
) -> None:
    fake_host.make_resctrl()
    fake_host.write("sys/fs/resctrl/BE/tasks", "5\n6\n")
    ex = make_executor(force_python=True)
    res = ex.resctrl.update_tasks("BE", [6, 7, 8], owner="RdtResctrl")
    assert res.written
    # on a plain file each write truncates, so the last one is what we can see; the audit shows both
    assert fake_host.read("sys/fs/resctrl/BE/tasks") == "8"
    assert ex.events()[-1]["after"] == "7,8"
    fake_host.write("sys/fs/resctrl/BE/tasks", "5\n6\n7\n8\n")
    assert ex.resctrl.update_tasks("BE", [5, 8], owner="RdtResctrl").skipped == "unchanged"
    assert writer.writes == []  # resctrl writes bypass the cgroup writer: they are native.write_batch


def test_tasks_of_missing_group_is_gone(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor]
) -> None:
    fake_host.make_resctrl()
    ex = make_executor()
    assert ex.resctrl.update_tasks("koordlet-pod1", [1], owner="r").skipped == "gone"
