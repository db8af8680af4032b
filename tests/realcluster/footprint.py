"""What a cluster leaves on the machine, to compare before its start and after its stop: mount points,
cgroups at the top of each hierarchy, network devices and processes (by PID and start time)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.realcluster import node
from tests.realcluster.procs import start_ticks

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _cgroups() -> frozenset[str]:
    """The kubelet's cgroup trees (``kubepods``) at the top of each hierarchy: what a cluster makes
    there (other tests make their own trees beside them, under their own names)."""
    return frozenset(str(p) for p in CGROUP_ROOT.glob("*/kubepods*") if p.is_dir())


def _mounts() -> frozenset[str]:
    with open("/proc/self/mountinfo") as f:
        return frozenset(line.split()[4] for line in f)


def _processes() -> frozenset[tuple[int, int, str]]:
    """(pid, start ticks, command line) of every process."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        ticks = start_ticks(pid)
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if ticks is not None:
            found.add((pid, ticks, cmdline))
    return frozenset(found)


@dataclass(frozen=True)
class Footprint:
    mounts: frozenset[str]
    cgroups: frozenset[str]
    links: frozenset[str]
    processes: frozenset[tuple[int, int, str]]

    @classmethod
    def now(cls) -> Footprint:
        return cls(_mounts(), _cgroups(), frozenset(node.links()), _processes())

    def added_since(self, before: Footprint, *, state: Path) -> dict[str, list[str]]:
        """What is here now and was not in ``before``. Processes count when their command line names the
        cluster's state directory (its components, containerd's shims): other engineers' processes come
        and go beside it."""
        new_procs = [
            f"{cmdline[:80]} (pid {pid})"
            for pid, ticks, cmdline in self.processes - before.processes
            if str(state) in cmdline and start_ticks(pid) == ticks
        ]
        found = {
            "mounts": sorted(self.mounts - before.mounts),
            "cgroups": sorted(self.cgroups - before.cgroups),
            "network devices": sorted(self.links - before.links),
            "processes": sorted(new_procs),
        }
        return {k: v for k, v in found.items() if v}
