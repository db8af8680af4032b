"""What the machine is doing besides a test: measured CPU use, and background load to test against.

Real-kernel tests run on machines other work also uses (CI neighbours, the other tests), and non-pod load
is real load for the agent: it shrinks what BE may use. So a test derives its expectations from what it
measures over the same window (:class:`CPUMeter`) instead of assuming an idle node, and the suite is run
once with a core kept busy outside kubepods (:func:`busy_outside_kubepods`) to prove it.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from koordlet.system.paths import DEFAULT_PROC_ROOT
from koordlet.system.procfs import clock_ticks, parse_proc_stat
from koordlet.testing.cgroups import BUSY, CGROUP_ROOT, RealCgroupTree


def node_cpu_seconds(proc_root: Path = Path(DEFAULT_PROC_ROOT)) -> tuple[float, float]:
    """``(busy, idle)`` CPU seconds of the whole node so far (``/proc/stat``; iowait counts as idle)."""
    stat = parse_proc_stat((proc_root / "stat").read_text())
    hz = clock_ticks()
    return stat.total.busy / hz, (stat.total.idle + stat.total.iowait) / hz


def cgroup_cpu_seconds(cgroup_dir: str, root: Path = CGROUP_ROOT) -> float:
    """CPU seconds a v1 cgroup (relative to the cpuacct root) has used so far."""
    return int((root / "cpuacct" / cgroup_dir / "cpuacct.usage").read_text()) / 1e9


@dataclass(frozen=True, slots=True)
class CPUWindow:
    """Cores used over one measured window: the node busy and idle, and each cgroup asked for."""

    seconds: float
    node_busy: float
    node_idle: float
    cgroups: dict[str, float]

    def others(self, *cgroup_dirs: str) -> float:
        """Cores the node used outside ``cgroup_dirs`` (system, other processes, other tests)."""
        return max(self.node_busy - sum(self.cgroups[d] for d in cgroup_dirs), 0.0)


class CPUMeter:
    """``start()`` then ``stop()`` (or :meth:`measure`) gives the :class:`CPUWindow` in between."""

    def __init__(self, *cgroup_dirs: str) -> None:
        self.cgroup_dirs = cgroup_dirs
        self._start: tuple[float, tuple[float, float], dict[str, float]] | None = None

    def _now(self) -> tuple[float, tuple[float, float], dict[str, float]]:
        return time.monotonic(), node_cpu_seconds(), {d: cgroup_cpu_seconds(d) for d in self.cgroup_dirs}

    def start(self) -> CPUMeter:
        self._start = self._now()
        return self

    def stop(self) -> CPUWindow:
        assert self._start is not None, "start() first"
        (t0, (b0, i0), c0), (t1, (b1, i1), c1) = self._start, self._now()
        dt = max(t1 - t0, 1e-6)
        return CPUWindow(dt, (b1 - b0) / dt, (i1 - i0) / dt, {d: (c1[d] - c0[d]) / dt for d in c0})

    def measure(self, seconds: float) -> CPUWindow:
        self.start()
        time.sleep(seconds)
        return self.stop()


@contextlib.contextmanager
def busy_outside_kubepods(cores: int = 1) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``cores`` processes spinning at full speed in a cgroup of their own (normal weight), away from any
    kubepods tree: the non-pod load a real node carries. Removed with its processes on the way out."""
    with RealCgroupTree(("cpu", "cpuacct"), parent=f"koordlet-busy-{uuid.uuid4().hex[:10]}") as tree:
        procs = [tree.spawn("", [sys.executable, "-c", BUSY, "1.0"]) for _ in range(cores)]
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        yield procs
