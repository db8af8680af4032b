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

from dataclasses import dataclass

from koord.apis.cpulist import format_cpuset
from koord.apis.nrt import CPUDetail

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
