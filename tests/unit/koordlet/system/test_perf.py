"""perf event naming, support checks, the perf_event cgroup of a container, and multiplex scaling."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from koordlet.api.errors import ResourceUnsupported, UnsafePath
from koordlet.system import native, perf
from koordlet.system.cgroups import CgroupMode
from koordlet.system.paths import HostPaths


def _paths(tmp_path: Path, paranoid: str | None = "2") -> HostPaths:
    paths = HostPaths(cgroup_root=tmp_path / "cg", proc_root=tmp_path / "proc", sys_root=tmp_path / "sys")
    if paranoid is not None:
        p = paths.proc("sys", "kernel", "perf_event_paranoid")
        p.parent.mkdir(parents=True)
        p.write_text(paranoid + "\n")
    return paths


def test_perf_cgroup_dir_per_hierarchy(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    with pytest.raises(ResourceUnsupported, match="no perf_event cgroup hierarchy"):
        perf.perf_cgroup_dir(paths, CgroupMode.V1, "kubepods/pod1")
    (paths.cgroup_root / "unified").mkdir(parents=True)
    (paths.cgroup_root / "unified" / "cgroup.controllers").write_text("\n")
    assert (
        perf.perf_cgroup_dir(paths, CgroupMode.V1, "kubepods/pod1")
        == paths.cgroup_root / "unified/kubepods/pod1"
    )
    (paths.cgroup_root / "perf_event").mkdir()
    assert (
        perf.perf_cgroup_dir(paths, CgroupMode.V1, "kubepods/") == paths.cgroup_root / "perf_event/kubepods"
    )
    assert perf.perf_cgroup_dir(paths, CgroupMode.V2, "a/b") == paths.cgroup_root / "a/b"
    with pytest.raises(UnsafePath):
        perf.perf_cgroup_dir(paths, CgroupMode.V2, "../etc")


def test_check_events_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _paths(tmp_path)
    with pytest.raises(ResourceUnsupported, match="unknown perf event"):
        perf.check_events(paths, ["bogus"])
    monkeypatch.setattr(native, "HAS_NATIVE", False)
    with pytest.raises(ResourceUnsupported, match="compiled helper"):
        perf.check_events(paths, ["task-clock"])
    monkeypatch.setattr(native, "HAS_NATIVE", True)
    with pytest.raises(ResourceUnsupported, match="kernel without perf"):
        perf.check_events(_paths(tmp_path / "x", paranoid=None), ["task-clock"])
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ResourceUnsupported, match="perf_event_paranoid is 2"):
        perf.check_events(_paths(tmp_path / "y"), ["task-clock"])
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(native, "perf_probe", lambda t, c: -errno.ENOENT if t == 0 else 0)
    with pytest.raises(ResourceUnsupported, match=r"'cycles' is not available here.*no PMU"):
        perf.check_events(_paths(tmp_path / "z"), perf.CPI_EVENTS)
    perf.check_events(_paths(tmp_path / "w"), ["task-clock"])


class FakeGroups:
    """Two CPUs; the second was multiplexed (counting half of the time it was enabled)."""

    def __init__(self, fd: int, cpus: Sequence[int], events: Sequence[tuple[int, int]]) -> None:
        self.cpus = tuple(cpus)
        self.closed = False

    def enable(self, on: bool = True) -> None:
        pass

    def read(self) -> list[native.PerfGroupRead]:
        return [
            native.PerfGroupRead(0, 1000, 1000, (3000, 1000)),
            native.PerfGroupRead(1, 1000, 500, (1000, 500)),
            native.PerfGroupRead(2, 1000, 0, (0, 0)),
        ]

    def open_fds(self) -> int:
        return 0

    def close(self) -> None:
        self.closed = True


def test_counts_are_scaled_by_enabled_over_running_and_summed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(native, "PerfGroups", FakeGroups)
    with perf.CgroupCounters(tmp_path, [0, 1, 2], perf.CPI_EVENTS) as counters:
        counters.start()
        sample = counters.read()
    # cpu0: 3000/1000 as is; cpu1: x2 (counted half the time) -> 2000/1000; cpu2 never ran: nothing
    assert dict(sample.values) == {"cycles": 5000.0, "instructions": 2000.0}
    assert (sample.time_enabled_ns, sample.time_running_ns) == (3000, 1500)


def test_kernel_refusals_become_unsupported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(fd: int, cpus: Sequence[int], events: Sequence[tuple[int, int]]) -> None:
        raise OSError(errno.ENOENT, "perf_event_open: No such file or directory (cpu 0, event (0, 0))")

    monkeypatch.setattr(native, "PerfGroups", refuse)
    with pytest.raises(ResourceUnsupported, match="cannot count cycles, instructions"):
        perf.CgroupCounters(tmp_path, [0], perf.CPI_EVENTS)
