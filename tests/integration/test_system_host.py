"""The read layer on this machine's real kernel: mode, topology, reads of a live cgroup, vanished cgroups.

Everything is created under a unique ``koordlet-test-<random>`` parent in each controller and removed
in the fixture teardown (processes killed first, then dirs deepest first), even when a test fails.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from koordlet.api import KubeQOSClass
from koordlet.api.cpulist import parse_cpuset
from koordlet.system.cgroups import CgroupMode, detect_mode
from koordlet.system.cgstats import parse_cpuacct_usage, parse_memory_stat
from koordlet.system.files import read_text
from koordlet.system.host import Host
from koordlet.system.paths import HostPaths
from koordlet.system.podpath import CgroupDriver
from koordlet.system.topology import read_cpu_topology, read_online_cpus
from koordlet.testing import wait_until
from koordlet.testing.cgroups import RealCgroupTree

pytestmark = pytest.mark.root

CONTROLLERS = ("cpu", "cpuacct", "memory")
REAL = HostPaths()


@pytest.fixture
def tree() -> Iterator[RealCgroupTree]:
    with RealCgroupTree(CONTROLLERS) as t:
        yield t


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


def test_reads_of_a_live_pod_cgroup(tree: RealCgroupTree) -> None:
    paths = HostPaths(cgroup_parent="/" + tree.parent)
    host = Host(paths, driver=CgroupDriver.CGROUPFS)
    assert host.mode is CgroupMode.V1
    uid = str(uuid.uuid4())
    pod = host.layout.pod_dir(uid, KubeQOSClass.BESTEFFORT)
    rel = pod.removeprefix(tree.parent + "/")
    tree.mkdir(rel)
    # b"x" * n writes its pages; bytearray(n) takes untouched zero pages that are never charged, so the
    # cgroup's usage was only the interpreter's (under 8 MiB when its pages were charged elsewhere).
    tree.python(rel, 'import time\nx = b"x" * (8 << 20)\nt = time.time()\nwhile time.time() - t < 20: pass')

    def usage() -> int:
        raw = host.read("cpuacct.usage", pod)
        assert raw is not None
        return parse_cpuacct_usage(raw)

    assert wait_until(lambda: usage() >= 20_000_000, 5.0, step=0.05), (
        "20 ms of CPU burnt by the child must show in cpuacct.usage"
    )

    def memory() -> int:
        mem_raw = host.read_raw("memory.stat", pod)
        assert mem_raw is not None
        return parse_memory_stat(mem_raw).usage

    # The 20 ms may be the interpreter starting, before the 8 MiB are written (a busy machine): wait.
    assert wait_until(lambda: memory() >= 8 << 20, 10.0, step=0.05), memory()
    assert host.list_cgroups(host.qos_cgroup_dir(KubeQOSClass.BESTEFFORT), 1)[-1] == pod
    assert host.read("cpu.cfs_quota_us", pod) == "-1"


def test_cgroup_removed_between_listing_and_read(tree: RealCgroupTree) -> None:
    host = Host(REAL, driver=CgroupDriver.CGROUPFS)
    for i in range(3):
        tree.mkdir(f"c{i}")
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
    from koordlet.api.errors import UnsafePath
    from koordlet.system.cgroups import resource_path

    # Real cgroup mounts skip the realpath walk (kernfs has no symlinks): the lexical checks must hold.
    link = REAL.cgroup_root / "cpu" / f"koordlet-test-link-{uuid.uuid4().hex[:6]}"
    with pytest.raises(PermissionError):
        os.symlink("/etc", link)
    for bad in ("../../../etc", "/etc", "a/../..", "a\x00"):
        with pytest.raises(UnsafePath):
            resource_path(REAL, CgroupMode.V1, "cpu.shares", bad)
    assert resource_path(REAL, CgroupMode.V1, "cpu.shares", "") == REAL.cgroup_root / "cpu" / "cpu.shares"
