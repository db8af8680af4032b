"""CPU topology from a fake sysfs: online list, SMT siblings, sockets, NUMA nodes; feature probes."""

from __future__ import annotations

import pytest

from koordlet.api import CPUInfo
from koordlet.errors import InvalidValue
from koordlet.system.cgroups import CgroupMode
from koordlet.system.probes import supports_cfs_burst, supports_psi, supports_resource
from koordlet.system.topology import (
    parse_node_meminfo,
    read_cpu_topology,
    read_numa_memory_usage,
    read_numa_nodes,
    read_online_cpus,
    read_smt_siblings,
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
    assert read_smt_siblings(fake_host.paths)[5] == frozenset({4, 5})
    assert read_numa_nodes(fake_host.paths) == {0: frozenset(range(4)), 1: frozenset(range(4, 8))}


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
    assert read_numa_nodes(fake_host.paths) == {0: frozenset({0})}


def test_feature_probes_v1(fake_host: FakeHost) -> None:
    assert not supports_cfs_burst(fake_host.paths, CgroupMode.V1)
    fake_host.enable_feature("cpu.cfs_burst_us")
    assert supports_cfs_burst(fake_host.paths, CgroupMode.V1)
    assert not supports_resource(fake_host.paths, CgroupMode.V1, "cpu.no_such_file")
    assert not supports_psi(fake_host.paths)
    fake_host.write_pressure("proc/pressure/cpu", (0.0, 0.0, 0.0, 1))
    assert supports_psi(fake_host.paths)


def test_feature_probes_v2_look_below_the_root(fake_host: FakeHost) -> None:
    fake_host.use_cgroup_v2()
    assert not supports_cfs_burst(fake_host.paths, CgroupMode.V2)
    fake_host.enable_feature("cpu.cfs_burst_us")
    assert (fake_host.paths.cgroup_root / "init.scope" / "cpu.max.burst").exists()
    assert supports_cfs_burst(fake_host.paths, CgroupMode.V2)
    assert not supports_resource(fake_host.paths, CgroupMode.V2, "blkio.weight")


def test_numa_meminfo_usage(fake_host: FakeHost) -> None:
    fake_host.set_online_cpus(range(4), cores_per_socket=2, numa_nodes=2)
    for node, (total, free, af, inf, srec) in enumerate([(1000, 100, 50, 25, 5), (2000, 1500, 0, 0, 600)]):
        fake_host.write(
            f"sys/devices/system/node/node{node}/meminfo",
            f"Node {node} MemTotal: {total} kB\nNode {node} MemFree: {free} kB\n"
            f"Node {node} Active(file): {af} kB\nNode {node} Inactive(file): {inf} kB\n"
            f"Node {node} SReclaimable: {srec} kB\nNode {node} HugePages_Total: 0\n",
        )
    usage = read_numa_memory_usage(fake_host.paths)
    assert usage == {0: (1000 - 180) * 1024, 1: 0}
    assert parse_node_meminfo("Node 0 MemFree: 1 kB\nNode 0 MemTotal: 2 kB\n")["MemTotal"] == 2048
    with pytest.raises(InvalidValue):
        parse_node_meminfo("garbage\n")
