"""A node's CPU topology as NodeNUMAResource sees it (Koordinator's ``nodenumaresource/cpu_topology.go``):
every logical CPU with its physical core, NUMA node and socket, from the ``node.koordinator.sh/cpu-topology``
annotation the agent writes on the NodeResourceTopology.

Cores are keyed ``socket << 16 | core`` as Koordinator keys them, so a topology whose core ids restart per
socket still has one key per physical core. A topology is valid when it has at least one CPU, core, NUMA
node and socket; a node without one cannot bind CPUs. Built once per report and shared read-only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from koordshared.apis.topology.noderesourcetopology import CPUDetail


@dataclass(frozen=True, slots=True)
class CPUInfo:
    cpu: int
    core: int
    """``socket << 16 | core id``: unique per physical core on the node."""
    node: int
    socket: int


class CPUTopology:
    """The node's CPUs (``details`` by id) with the counts and groupings the allocator asks for often."""

    __slots__ = (
        "cores_by_cpu",
        "cpus_by_core",
        "cpus_by_node",
        "cpus_by_socket",
        "details",
        "num_cores",
        "num_cpus",
        "num_nodes",
        "num_sockets",
    )

    def __init__(self, details: Mapping[int, CPUInfo]) -> None:
        self.details: Mapping[int, CPUInfo] = dict(details)
        self.cpus_by_core: dict[int, frozenset[int]] = _group(self.details, "core")
        self.cpus_by_node: dict[int, frozenset[int]] = _group(self.details, "node")
        self.cpus_by_socket: dict[int, frozenset[int]] = _group(self.details, "socket")
        self.num_cpus = len(self.details)
        self.num_cores = len(self.cpus_by_core)
        # Koordinator counts NUMA nodes per socket (a NUMA node id seen under two sockets counts twice).
        self.num_nodes = len({(i.socket, i.node) for i in self.details.values()})
        self.num_sockets = len(self.cpus_by_socket)

    @classmethod
    def of(cls, cpus: Iterable[CPUDetail]) -> CPUTopology:
        return cls({c.id: CPUInfo(c.id, c.socket << 16 | c.core, c.node, c.socket) for c in cpus})

    @property
    def valid(self) -> bool:
        return self.num_cpus > 0 and self.num_cores > 0 and self.num_nodes > 0 and self.num_sockets > 0

    @property
    def cpus(self) -> frozenset[int]:
        return frozenset(self.details)

    def cpus_per_core(self) -> int:
        return self.num_cpus // self.num_cores if self.num_cores else 0

    def cpus_per_node(self) -> int:
        return self.num_cpus // self.num_nodes if self.num_nodes else 0

    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    def numa_nodes(self) -> list[int]:
        return sorted(self.cpus_by_node)

    def cpus_in_nodes(self, *nodes: int) -> frozenset[int]:
        out: frozenset[int] = frozenset()
        for n in nodes:
            out |= self.cpus_by_node.get(n, frozenset())
        return out

    def cores_of(self, cpus: Iterable[int]) -> set[int]:
        return {self.details[c].core for c in cpus if c in self.details}


@dataclass(frozen=True, slots=True)
class AllocatedCPU:
    """A CPU bound to pods: how many hold it and the exclusive policy of the last one bound
    (Koordinator's ``CPUInfo.RefCount`` and ``ExclusivePolicy``)."""

    refs: int
    exclusive: str = ""


def _group(details: Mapping[int, CPUInfo], attr: str) -> dict[int, frozenset[int]]:
    out: dict[int, set[int]] = {}
    for cpu, info in details.items():
        out.setdefault(getattr(info, attr), set()).add(cpu)
    return {k: frozenset(v) for k, v in out.items()}


EMPTY = CPUTopology({})
