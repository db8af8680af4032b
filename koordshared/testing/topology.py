"""Simulated node topologies for tests on either side of the node-scheduler contract.

A :class:`SimulatedTopology` is sockets x NUMA nodes per socket x cores per NUMA node x SMT threads, with
memory and huge pages per NUMA node, numbered as Linux numbers x86 CPUs: the first thread of every core,
socket by socket, then the second threads (so ``cpu`` and ``cpu + cores`` are siblings). The scheduler's
tests build the NodeResourceTopology annotations from it (:meth:`SimulatedTopology.cpu_details`); the
agent's kit writes it as a sysfs/procfs tree (``koordlet.testing.sysfs``) for the real readers, and the
two must agree. :data:`TWO_SOCKETS` is the topology the contract's tests share (2 sockets x 2 NUMA nodes x
2 cores x 2 threads = 16 CPUs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordshared.apis.extension.numa import dumps
from koordshared.apis.meta.cpulist import format_cpuset
from koordshared.apis.meta.quantity import format_bytes
from koordshared.apis.topology import noderesourcetopology as nrt
from koordshared.apis.topology.noderesourcetopology import (
    CPUDetail,
    NodeTopologyStatus,
    ResourceInfo,
    Zone,
    new_object,
    zone_name,
)

GiB = 1 << 30


@dataclass(frozen=True, slots=True)
class SimulatedTopology:
    sockets: int = 1
    numa_per_socket: int = 1
    cores_per_numa: int = 2
    threads: int = 1
    memory_per_numa: int = 16 * GiB
    """``MemTotal`` of each NUMA node, bytes (huge pages included, as the kernel counts them)."""
    hugepages_2m_per_numa: int = 0
    hugepages_1g_per_numa: int = 0
    model: str = "Intel(R) Xeon(R) Platinum 8269CY CPU @ 2.50GHz"
    vendor: str = "GenuineIntel"

    @property
    def cores(self) -> int:
        return self.sockets * self.numa_per_socket * self.cores_per_numa

    @property
    def numa_nodes(self) -> int:
        return self.sockets * self.numa_per_socket

    @property
    def cpu_count(self) -> int:
        return self.cores * self.threads

    def cpu_details(self) -> list[CPUDetail]:
        """Every logical CPU by id, ``core`` numbered over the node (as ``cpu-topology`` carries it)."""
        out = []
        for thread in range(self.threads):
            for core in range(self.cores):
                numa = core // self.cores_per_numa
                socket = numa // self.numa_per_socket
                out.append(CPUDetail(thread * self.cores + core, core, socket, numa))
        return sorted(out, key=lambda c: c.id)

    def local_core_id(self, cpu: int) -> int:
        """The core's id within its socket, as sysfs ``topology/core_id`` gives it."""
        core = cpu % self.cores
        return core % (self.numa_per_socket * self.cores_per_numa)

    def numa_cpus(self, numa: int) -> frozenset[int]:
        return frozenset(c.id for c in self.cpu_details() if c.node == numa)

    def numa_cpulist(self, numa: int) -> str:
        return format_cpuset(self.numa_cpus(numa))

    def siblings(self, cpu: int) -> frozenset[int]:
        core = cpu % self.cores
        return frozenset(core + t * self.cores for t in range(self.threads))


TWO_SOCKETS = SimulatedTopology(sockets=2, numa_per_socket=2, cores_per_numa=2, threads=2)
"""2 sockets x 2 NUMA nodes x 2 cores x 2 threads: NUMA node n holds cores 2n, 2n+1 and CPUs
``{2n, 2n+1, 2n+8, 2n+9}``; socket s holds NUMA nodes 2s and 2s+1."""


def node_resource_topology(
    node: str,
    topo: SimulatedTopology,
    *,
    policy: str = "None",
    kubelet: nrt.KubeletCPUManagerPolicy | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The NodeResourceTopology object the agent reports for an idle node of ``topo`` (no pods bound,
    every CPU in the share pools), as the scheduler's tests and benchmarks feed it: ``policy`` is the
    ``topologyPolicies`` entry, ``kubelet`` the CPU manager annotation (default ``{"policy":"none"}``),
    ``annotations`` any to add or replace."""
    details = topo.cpu_details()
    pools = nrt.pools_from_cpus(details)
    zones = []
    for n in range(topo.numa_nodes):
        cpus = str(len(topo.numa_cpus(n)))
        huge = topo.hugepages_2m_per_numa * (2 << 20) + topo.hugepages_1g_per_numa * (1 << 30)
        memory = format_bytes(topo.memory_per_numa - huge)
        two_m = format_bytes(topo.hugepages_2m_per_numa * (2 << 20))
        one_g = format_bytes(topo.hugepages_1g_per_numa * (1 << 30))
        zones.append(
            Zone(
                zone_name(n),
                resources=(
                    ResourceInfo("cpu", cpus, cpus, cpus),
                    ResourceInfo("hugepages-1Gi", one_g, one_g, one_g),
                    ResourceInfo("hugepages-2Mi", two_m, two_m, two_m),
                    ResourceInfo("memory", memory, memory, memory),
                ),
            )
        )
    kubelet = kubelet or nrt.KubeletCPUManagerPolicy(nrt.KUBELET_POLICY_NONE)
    basic = nrt.CPUBasicInfo(topo.model, topo.threads > 1, True, "", topo.vendor)
    status = NodeTopologyStatus(
        tuple(zones),
        policy,
        {
            nrt.ANNOTATION_CPU_BASIC_INFO: dumps(basic.to_json()),
            nrt.ANNOTATION_CPU_TOPOLOGY: nrt.cpu_topology_json(details),
            nrt.ANNOTATION_CPU_SHARED_POOLS: nrt.share_pools_json(pools),
            nrt.ANNOTATION_KUBELET_CPU_MANAGER_POLICY: dumps(kubelet.to_json()),
            nrt.ANNOTATION_BE_CPU_SHARED_POOLS: nrt.share_pools_json(pools),
            nrt.ANNOTATION_POD_CPU_ALLOCS: nrt.pod_cpu_allocs_json(()),
            nrt.ANNOTATION_NODE_RESERVATION: "{}",
            nrt.ANNOTATION_SYSTEM_QOS_RESOURCE: "{}",
            **(annotations or {}),
        },
    )
    return status.apply_to(new_object(node, ""))
