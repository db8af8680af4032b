"""Host (the HostReader): reads through the resource table on v1, v2 and systemd trees; vanished cgroups."""

from __future__ import annotations

import os

import pytest

from koordlet.api import HostReader, KubeQOSClass
from koordlet.api.errors import CgroupGone, ResourceUnsupported, UnsafePath
from koordlet.system.cgroups import CgroupMode
from koordlet.system.cgstats import parse_memory_stat
from koordlet.system.host import Host
from koordlet.system.podpath import CgroupDriver
from koordshared.runtime.errors import InvalidValue
from tests.support.fakehost import FakeHost

UID = "0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b"
CID = "0123456789abcdef" * 4


def test_host_is_a_host_reader(fake_host: FakeHost) -> None:
    host: HostReader = Host(fake_host.paths)
    assert host.cgroup_version() == 1


def test_v1_cgroupfs_reads(fake_host: FakeHost) -> None:
    pod = fake_host.pod_cgroup(UID, KubeQOSClass.BURSTABLE)
    fake_host.write_cgroup("cpu.cfs_quota_us", pod, "-1")
    fake_host.write_cgroup("cpuacct.usage", pod, "987654321")
    fake_host.write_cgroup("memory.limit_in_bytes", pod, "9223372036854771712")
    fake_host.write_memory_stat(pod, active_anon=100, inactive_anon=50, unevictable=7, active_file=1000)
    host = Host(fake_host.paths)
    assert (host.mode, host.driver) == (CgroupMode.V1, CgroupDriver.CGROUPFS)
    assert host.qos_cgroup_dir(KubeQOSClass.BURSTABLE) == "kubepods/burstable"
    assert host.read("cpu.cfs_quota_us", pod) == "-1"
    assert host.read("cpuacct.usage", pod) == "987654321"
    assert host.read("memory.limit_in_bytes", pod) == "-1"
    raw = host.read_raw("memory.stat", pod)
    assert raw is not None and parse_memory_stat(raw).usage == 157


def test_v2_reads_translate_to_v1_meaning(fake_host: FakeHost) -> None:
    fake_host.use_cgroup_v2()
    pod = fake_host.pod_cgroup(UID, KubeQOSClass.BESTEFFORT)
    fake_host.write_cgroup("cpu.cfs_quota_us", pod, "max 100000")
    fake_host.write_cgroup("cpuacct.usage", pod, "usage_usec 2500\nuser_usec 2000\nsystem_usec 500")
    fake_host.write_cgroup("cpu.shares", pod, "1")
    fake_host.write_cgroup("cpuset.cpus", pod, "0-1")
    fake_host.write_memory_stat(pod, active_anon=10, inactive_anon=20, unevictable=3)
    host = Host(fake_host.paths)
    assert host.cgroup_version() == 2
    assert host.read("cpu.cfs_quota_us", pod) == "-1"
    assert host.read("cpu.cfs_period_us", pod) == "100000"
    assert host.read("cpuacct.usage", pod) == "2500000"
    assert host.read("cpu.shares", pod) == "2"
    assert host.read("cpuset.cpus", pod) == "0-1"
    assert (fake_host.paths.cgroup_root / pod / "cpuset.cpus.effective").exists()
    raw = host.read_raw("memory.stat", pod)
    assert raw is not None and parse_memory_stat(raw).usage == 33


def test_systemd_tree_detected_and_listed(fake_host: FakeHost) -> None:
    pod = fake_host.pod_cgroup(UID, KubeQOSClass.BESTEFFORT, driver=CgroupDriver.SYSTEMD)
    cont = fake_host.container_cgroup(UID, f"containerd://{CID}", driver=CgroupDriver.SYSTEMD)
    host = Host(fake_host.paths)
    assert host.driver is CgroupDriver.SYSTEMD
    qos = host.qos_cgroup_dir(KubeQOSClass.BESTEFFORT)
    assert qos == "kubepods.slice/kubepods-besteffort.slice"
    assert host.list_cgroups(qos, 2) == [qos, pod, cont]
    assert host.list_cgroups(qos, 0) == [qos]
    assert host.list_cgroups("kubepods.slice", 1) == ["kubepods.slice", qos]
    assert host.list_cgroups("absent", 3) == []


def test_vanished_cgroup_reads_none(fake_host: FakeHost) -> None:
    pod = fake_host.pod_cgroup(UID)
    host = Host(fake_host.paths)
    listed = host.list_cgroups(host.qos_cgroup_dir(KubeQOSClass.BESTEFFORT), 1)
    assert pod in listed
    for sub in ("cpu", "cpuacct"):
        os.rmdir(fake_host.paths.cgroup_root / sub / pod)
    assert host.read("cpuacct.usage", pod) is None
    assert host.read_raw("cpu.stat", pod) is None
    with pytest.raises(CgroupGone):
        host.read_or_raise("cpuacct.usage", pod)


def test_missing_file_in_live_cgroup_is_unsupported(fake_host: FakeHost) -> None:
    pod = fake_host.pod_cgroup(UID)
    host = Host(fake_host.paths)
    with pytest.raises(ResourceUnsupported):
        host.read("cpu.cfs_burst_us", pod)
    assert not host.supports("cpu.cfs_burst_us")
    assert not host.supports("no.such.resource")


def test_supports_is_probed_once(fake_host: FakeHost) -> None:
    fake_host.enable_feature("cpu.idle")
    host = Host(fake_host.paths)
    assert host.supports("cpu.idle")
    (fake_host.paths.cgroup_root / "cpu" / "cpu.idle").unlink()
    assert host.supports("cpu.idle")  # kernel features do not come and go: cached


def test_symlinked_file_inside_root_is_refused(fake_host: FakeHost) -> None:
    pod = fake_host.pod_cgroup(UID)
    fake_host.write_cgroup("cpu.shares", "", "1024")
    os.symlink(
        fake_host.paths.cgroup_root / "cpu" / "cpu.shares",
        fake_host.paths.cgroup_root / "cpu" / pod / "cpu.shares",
    )
    with pytest.raises(UnsafePath):
        Host(fake_host.paths).read("cpu.shares", pod)


def test_garbage_content_raises_invalid_value(fake_host: FakeHost) -> None:
    fake_host.use_cgroup_v2()
    fake_host.mkcgroup(None, "x")
    fake_host.write_cgroup("cpu.cfs_quota_us", "x", "garbage")
    with pytest.raises(InvalidValue):
        Host(fake_host.paths).read("cpu.cfs_quota_us", "x")


def test_topology_from_host(fake_host: FakeHost) -> None:
    fake_host.set_online_cpus(range(4), threads_per_core=2)
    topo = Host(fake_host.paths).cpu_topology()
    assert [(c.cpu, c.core) for c in topo] == [(0, 0), (1, 0), (2, 1), (3, 1)]
