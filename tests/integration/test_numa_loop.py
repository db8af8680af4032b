"""The loop's node-scheduler scenario end to end (``make loop`` runs it after the colocation one): the test
API server, a process kubelet, koord-scheduler with NodeNUMAResource and a koordlet reading a simulated
topology laid over this machine's two CPUs. An LSR pod placed by koord-scheduler on a whole core has its
real container cgroup pinned there (quota lifted, its process allowed on that CPU only), an LS pod gets
the shared pool, a BE pod's batch resources become its real cgroup limits; nothing is left afterwards."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from tests.loop import numa


@pytest.mark.root
@pytest.mark.slow
def test_the_numa_loop(tmp_path: Path) -> None:
    lines: list[str] = []
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    started = time.monotonic()
    loop = numa.NumaLoop(tmp_path, lambda who, text: lines.append(f"{who}: {text}"))
    try:
        report = loop.run()
    finally:
        loop.close()
    took = time.monotonic() - started
    assert loop.kubelet is not None
    parent = loop.kubelet.cgroup_parent
    narrated = "\n".join(lines)
    assert numa.problems(report) == [], f"{numa.summary(report)}\n{narrated}"
    assert report.lsr_cpuset in ("0", "1") and report.lsr_allowed == report.lsr_cpuset
    for who in ("koord-scheduler", f"koordlet-{numa.NODE}", f"kubelet {numa.NODE}"):
        assert any(line.startswith(who) for line in lines), who
    assert took < 120, f"the scenario took {took:.0f}s"
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert not [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], left
    for controller in ("cpu", "cpuacct", "cpuset", "memory"):
        assert not Path("/sys/fs/cgroup", controller, parent).exists(), f"{controller}/{parent} left behind"
