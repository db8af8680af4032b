"""The read layer on this machine's real kernel: mode, topology, reads of a live cgroup, vanished cgroups.

Everything is created under a unique ``koordlet-test-<random>`` parent in each controller and removed
in the fixture teardown (processes killed first, then dirs deepest first), even when a test fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from koordlet.api import KubeQOSClass
from koordlet.api.cpulist import parse_cpuset
from koordlet.system.cgroups import CgroupMode, detect_mode
from koordlet.system.cgstats import parse_cpuacct_usage, parse_memory_stat
from koordlet.system.files import read_text
from koordlet.system.host import Host
from koordlet.system.paths import HostPaths
from koordlet.system.podpath import CgroupDriver
from koordlet.system.procfs import read_pid_stat
from koordlet.system.topology import read_cpu_topology, read_online_cpus

pytestmark = pytest.mark.root

CONTROLLERS = ("cpu", "cpuacct", "memory")
REAL = HostPaths()


@dataclass
class CgTree:
    parent: str
    paths: HostPaths
    dirs: list[Path] = field(default_factory=list)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def mk(self, rel: str) -> str:
        """Create ``<parent>/<rel>`` (and its ancestors) in every controller; returns the cgroup dir."""
        cg = f"{self.parent}/{rel}" if rel else self.parent
        for ctl in CONTROLLERS:
            parts = cg.split("/")
            for i in range(1, len(parts) + 1):
                d = REAL.cgroup_root / ctl / "/".join(parts[:i])
                if not d.exists():
                    d.mkdir()
                    self.dirs.append(d)
        return cg

    def spawn_into(self, cg: str, code: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", code])
        self.procs.append(proc)
        for ctl in CONTROLLERS:
            fd = os.open(REAL.cgroup_root / ctl / cg / "cgroup.procs", os.O_WRONLY)
            try:
                assert os.write(fd, str(proc.pid).encode()) == len(str(proc.pid))
            finally:
                os.close(fd)
        return proc


@pytest.fixture
def tree() -> Iterator[CgTree]:
    t = CgTree(parent=f"koordlet-test-{uuid.uuid4().hex[:10]}", paths=REAL)
    try:
        yield t
    finally:
        for p in t.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait(timeout=10)
        for d in sorted(t.dirs, key=lambda p: len(p.parts), reverse=True):
            for _ in range(50):  # a killed task leaves the cgroup asynchronously
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def test_mode_is_v1_on_this_hybrid_host() -> None:
    assert (REAL.cgroup_root / "unified").is_dir()
    assert detect_mode(REAL) is CgroupMode.V1
    assert Host(REAL, driver=CgroupDriver.CGROUPFS).cgroup_version() == 1


def test_topology_matches_the_kernel() -> None:
    online = read_online_cpus(REAL)
    assert len(online) == os.cpu_count()
    assert os.sched_getaffinity(0) <= online
    topo = read_cpu_topology(REAL)
    assert [c.cpu for c in topo] == sorted(online)
    for c in topo:
        sib = (REAL.sys_root / f"devices/system/cpu/cpu{c.cpu}/topology/thread_siblings_list").read_text()
        same_core = {o.cpu for o in topo if o.core == c.core}
        assert same_core == parse_cpuset(sib) & online


def test_reads_of_a_live_pod_cgroup(tree: CgTree) -> None:
    paths = HostPaths(cgroup_parent="/" + tree.parent)
    host = Host(paths, driver=CgroupDriver.CGROUPFS)
    assert host.mode is CgroupMode.V1
    uid = str(uuid.uuid4())
    pod = host.layout.pod_dir(uid, KubeQOSClass.BESTEFFORT)
    tree.mk(pod.removeprefix(tree.parent + "/"))
    proc = tree.spawn_into(
        pod, "import time\nx = bytearray(8 << 20)\nt = time.time()\nwhile time.time() - t < 20: pass"
    )
    deadline = time.monotonic() + 5
    usage = 0
    while time.monotonic() < deadline and usage < 20_000_000:
        raw = host.read("cpuacct.usage", pod)
        assert raw is not None
        usage = parse_cpuacct_usage(raw)
        time.sleep(0.05)
    assert usage >= 20_000_000, "20 ms of CPU burnt by the child must show in cpuacct.usage"
    mem_raw = host.read_raw("memory.stat", pod)
    assert mem_raw is not None
    assert parse_memory_stat(mem_raw).usage >= 8 << 20
    st = read_pid_stat(REAL, proc.pid)
    assert st is not None and st.pid == proc.pid
    assert host.list_cgroups(host.qos_cgroup_dir(KubeQOSClass.BESTEFFORT), 1)[-1] == pod
    assert host.read("cpu.cfs_quota_us", pod) == "-1"


def test_cgroup_removed_between_listing_and_read(tree: CgTree) -> None:
    host = Host(REAL, driver=CgroupDriver.CGROUPFS)
    for i in range(3):
        tree.mk(f"c{i}")
    listed = host.list_cgroups(tree.parent, 1)
    assert listed == [tree.parent] + [f"{tree.parent}/c{i}" for i in range(3)]
    victim = listed[2]
    held = os.open(REAL.cgroup_root / "cpuacct" / victim / "cpuacct.usage", os.O_RDONLY)
    try:
        for ctl in CONTROLLERS:
            (REAL.cgroup_root / ctl / victim).rmdir()
        with pytest.raises(OSError) as err:
            os.pread(held, 64, 0)  # the kernel's answer for an fd that outlived its cgroup
        assert err.value.errno in (19, 2)
    finally:
        os.close(held)
    results = {cg: host.read("cpuacct.usage", cg) for cg in listed}
    assert results[victim] is None
    assert all(v is not None and v.isdigit() for cg, v in results.items() if cg != victim)
    assert read_text(REAL.cgroup_root / "cpuacct" / listed[1] / "cpuacct.usage").strip().isdigit()


def test_real_mount_refuses_lexical_escapes_on_the_fast_path() -> None:
    from koordlet.errors import UnsafePath
    from koordlet.system.cgroups import resource_path

    # Real cgroup mounts skip the realpath walk (kernfs has no symlinks): the lexical checks must hold.
    link = REAL.cgroup_root / "cpu" / f"koordlet-test-link-{uuid.uuid4().hex[:6]}"
    with pytest.raises(PermissionError):
        os.symlink("/etc", link)
    for bad in ("../../../etc", "/etc", "a/../..", "a\x00"):
        with pytest.raises(UnsafePath):
            resource_path(REAL, CgroupMode.V1, "cpu.shares", bad)
    assert resource_path(REAL, CgroupMode.V1, "cpu.shares", "") == REAL.cgroup_root / "cpu" / "cpu.shares"
