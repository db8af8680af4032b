"""CPU topology from a fake sysfs: online list, SMT siblings, sockets, NUMA nodes; feature probes."""

from __future__ import annotations

from koordlet.api import CPUInfo
from koordlet.system.cgroups import CgroupMode
from koordlet.system.probes import supports_resource
from koordlet.system.topology import (
    read_cpu_topology,
    read_online_cpus,
)
from tests.support.fakehost import FakeHost


def test_two_sockets_smt_two_nodes(fake_host: FakeHost) -> None:
    fake_host.set_online_cpus(range(8), threads_per_core=2, cores_per_socket=2, numa_nodes=2)
    topo = read_cpu_topology(fake_host.paths)
    assert [c.cpu for c in topo] == list(range(8))
    # Per-socket core_id restarts at 0 on socket 1; the global core id must not collide.
    assert [c.core for c in topo] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [c.socket for c in topo] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [c.node for c in topo] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_offline_cpus_are_left_out(fake_host: FakeHost) -> None:
    fake_host.set_online_cpus([0, 1, 3])
    assert read_online_cpus(fake_host.paths) == frozenset({0, 1, 3})
    assert read_cpu_topology(fake_host.paths) == [
        CPUInfo(cpu=0, core=0, socket=0, node=0),
        CPUInfo(cpu=1, core=1, socket=0, node=0),
        CPUInfo(cpu=3, core=2, socket=0, node=0),
    ]


def test_missing_sysfs_means_one_cpu(fake_host: FakeHost) -> None:
    assert read_online_cpus(fake_host.paths) == frozenset({0})


def test_feature_probes_v1(fake_host: FakeHost) -> None:
    assert not supports_resource(fake_host.paths, CgroupMode.V1, "cpu.cfs_burst_us")
    fake_host.enable_feature("cpu.cfs_burst_us")
    assert supports_resource(fake_host.paths, CgroupMode.V1, "cpu.cfs_burst_us")
    assert not supports_resource(fake_host.paths, CgroupMode.V1, "cpu.no_such_file")


def test_feature_probes_v2_look_below_the_root(fake_host: FakeHost) -> None:
    fake_host.use_cgroup_v2()
    assert not supports_resource(fake_host.paths, CgroupMode.V2, "cpu.cfs_burst_us")
    fake_host.enable_feature("cpu.cfs_burst_us")
    assert (fake_host.paths.cgroup_root / "init.scope" / "cpu.max.burst").exists()
    assert supports_resource(fake_host.paths, CgroupMode.V2, "cpu.cfs_burst_us")
    assert not supports_resource(fake_host.paths, CgroupMode.V2, "blkio.weight")
