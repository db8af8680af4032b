"""perf_event counting per cgroup on the real kernel, through the C helper: a busy process in a cgroup the
test makes (in the perf_event hierarchy this host has: v1 ``perf_event`` or the cgroup2 tree).

This VM has no hardware PMU (``cycles``/``instructions`` do not exist here), so the counting path is
proven with software events (``task-clock`` against the cgroup's own CPU time); the CPI test checks that
the hardware events are refused with a clear reason here, and measures a real CPI where a PMU exists.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from koordlet.api import parse_cpuset
from koordlet.api.errors import CgroupGone, ResourceUnsupported
from koordlet.system import perf
from koordlet.system.cgroups import detect_mode
from koordlet.system.paths import HostPaths

pytestmark = [pytest.mark.root, pytest.mark.native]  # counting needs the C helper (csrc/koordlet_perf.c)

BUSY = "import time\nwhile True:\n    time.perf_counter()\n"


def _online_cpus(paths: HostPaths) -> list[int]:
    return sorted(parse_cpuset(paths.sys("devices", "system", "cpu", "online").read_text()))


@pytest.fixture
def busy_cgroup() -> Iterator[Path]:
    paths = HostPaths()
    try:
        cgroup = perf.perf_cgroup_dir(paths, detect_mode(paths), f"koordlet-test-perf-{uuid.uuid4().hex[:8]}")
    except ResourceUnsupported as err:
        pytest.skip(str(err))
    cgroup.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        (cgroup / "cgroup.procs").write_text(str(proc.pid))
        yield cgroup
    finally:
        proc.kill()
        proc.wait()
        for _ in range(50):  # the dead task leaves the cgroup asynchronously
            with contextlib.suppress(OSError):
                cgroup.rmdir()
            if not cgroup.exists():
                break
            time.sleep(0.02)


def _usage_ns(cgroup: Path) -> int:
    """CPU time of the cgroup from the kernel's own accounting (cgroup2 ``cpu.stat`` or v1 cpuacct)."""
    stat = cgroup / "cpu.stat"
    if stat.exists():
        for line in stat.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) * 1000
    return int(Path("/sys/fs/cgroup/cpuacct", cgroup.name, "cpuacct.usage").read_text())


def test_task_clock_of_a_busy_cgroup_matches_its_cpu_time(busy_cgroup: Path) -> None:
    paths = HostPaths()
    events = ("task-clock", "context-switches")
    try:
        perf.check_events(paths, events)
    except ResourceUnsupported as err:
        pytest.skip(str(err))
    fds_before = len(os.listdir("/proc/self/fd"))
    with perf.CgroupCounters(busy_cgroup, _online_cpus(paths), events) as counters:
        assert counters.open_fds() == 2 * len(_online_cpus(paths))
        before = _usage_ns(busy_cgroup)
        counters.start()
        time.sleep(1.0)
        sample = counters.read()
        after = _usage_ns(busy_cgroup)
    assert len(os.listdir("/proc/self/fd")) == fds_before
    counted, accounted = sample.values["task-clock"], after - before
    print(f"task-clock {counted / 1e6:.1f} ms, cgroup CPU time {accounted / 1e6:.1f} ms")
    assert accounted > 0.05e9, "the busy process barely ran"
    # both clocks watch the same tasks over nearly the same interval (the reads are microseconds apart)
    assert abs(counted - accounted) <= 0.1 * accounted + 20e6
    assert sample.time_enabled_ns > 0 and sample.values["context-switches"] >= 0


def test_cpi_is_measured_where_the_pmu_allows_and_refused_clearly_elsewhere(busy_cgroup: Path) -> None:
    paths = HostPaths()
    try:
        perf.check_events(paths, perf.CPI_EVENTS)
    except ResourceUnsupported as err:
        assert "not available here" in str(err) or "paranoid" in str(err)
        # opening them anyway is refused the same clean way, nothing left open
        with pytest.raises(ResourceUnsupported):
            perf.CgroupCounters(busy_cgroup, _online_cpus(paths), perf.CPI_EVENTS)
        return
    with perf.CgroupCounters(busy_cgroup, _online_cpus(paths), perf.CPI_EVENTS) as counters:
        counters.start()
        time.sleep(1.0)
        sample = counters.read()
    assert sample.values["instructions"] > 0, sample
    cpi = sample.values["cycles"] / sample.values["instructions"]
    assert 0.05 < cpi < 50, sample


def test_a_removed_cgroup_is_gone() -> None:
    paths = HostPaths()
    try:
        missing = perf.perf_cgroup_dir(
            paths, detect_mode(paths), f"koordlet-test-perf-{uuid.uuid4().hex[:8]}"
        )
        perf.check_events(paths, ("task-clock",))
    except ResourceUnsupported as err:
        pytest.skip(str(err))
    with pytest.raises(CgroupGone):
        perf.CgroupCounters(missing, _online_cpus(paths), ("task-clock",))
