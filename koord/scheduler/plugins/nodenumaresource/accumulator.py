"""Which CPUs a pod gets on a node (Koordinator's ``nodenumaresource/cpu_accumulator.go``, v1.8 order of
preference), given the CPUs still free, those already bound (their exclusive policies), the bind policy
and the NUMA allocate strategy. Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from koord.scheduler.plugins.nodenumaresource.cputopology import AllocatedCPU, CPUInfo, CPUTopology
from koordshared.apis.extension.numa import CPUBindPolicy, CPUExclusivePolicy, NUMAAllocateStrategy

ERR_NOT_ENOUGH_CPUS = "not enough cpus available to satisfy request"
ERR_FAILED = "failed to allocate cpus"


class AllocationError(Exception):
    """The CPUs asked for cannot be taken; the message is Koordinator's."""


def take_preferred_cpus(
    topo: CPUTopology,
    max_refs: int,
    available: frozenset[int],
    preferred: frozenset[int],
    allocated: Mapping[int, AllocatedCPU],
    needed: int,
    policy: str,
    exclusive: str,
    strategy: str,
) -> frozenset[int]:
    """``needed`` CPUs of ``available``, as many as possible of ``preferred`` first."""
    result: frozenset[int] = frozenset()
    preferred = available & preferred
    if preferred:
        result = take_cpus(
            topo, max_refs, preferred, allocated, min(needed, len(preferred)), policy, exclusive, strategy
        )
        needed -= len(result)
        available = available - preferred
    if needed > 0:
        result |= take_cpus(topo, max_refs, available, allocated, needed, policy, exclusive, strategy)
    return result


def take_cpus(
    topo: CPUTopology,
    max_refs: int,
    available: frozenset[int],
    allocated: Mapping[int, AllocatedCPU],
    needed: int,
    policy: str,
    exclusive: str,
    strategy: str,
) -> frozenset[int]:
    acc = _Accumulator(topo, max_refs, available, allocated, needed, exclusive, strategy)
    if acc.satisfied():
        return frozenset(acc.result)
    if acc.failed():
        raise AllocationError(ERR_NOT_ENOUGH_CPUS)
    per_core = topo.cpus_per_core()
    full = policy == CPUBindPolicy.FULL_PCPUS
    if full or per_core == 1:
        if acc.needed <= topo.cpus_per_node():
            for filter_exclusive in (True, False):
                for cpus in acc.free_cores_in_node(filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(cpus[: acc.needed])
                        return frozenset(acc.result)
        if acc.needed <= topo.cpus_per_socket():
            for cpus in acc.free_cores_in_socket():
                if len(cpus) >= acc.needed:
                    acc.take(cpus[: acc.needed])
                    return frozenset(acc.result)
        # More than a socket, or every node and socket partly taken: whole cores from the sockets with
        # the most free cores (the strategy no longer applies), then from those with the fewest.
        by_size = sorted(acc.free_cores_in_socket(), key=len, reverse=True)
        short: list[list[int]] = []
        for cpus in by_size:
            if not acc.needs(len(cpus)):
                short.append(cpus)
                continue
            acc.take(cpus)
            if acc.satisfied():
                return frozenset(acc.result)
        if acc.needs(per_core):
            for cpus in sorted(short, key=len):
                for i in range(0, len(cpus), per_core):
                    acc.take(cpus[i : i + per_core])
                    if acc.satisfied():
                        return frozenset(acc.result)
                    if not acc.needs(per_core):
                        break
    if not full:
        if acc.needed <= topo.cpus_per_node():
            for filter_exclusive in (True, False):
                for cpus in acc.free_cpus_in_node(filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(acc.spread(cpus)[: acc.needed])
                        return frozenset(acc.result)
        if acc.needed <= topo.cpus_per_socket():
            for filter_exclusive in (True, False):
                for cpus in acc.free_cpus_in_socket(filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(acc.spread(cpus)[: acc.needed])
                        return frozenset(acc.result)
    for filter_exclusive in (True, False):
        for c in acc.spread(acc.free_cpus(filter_exclusive)):
            if acc.needs(1):
                acc.take([c])
            if acc.satisfied():
                return frozenset(acc.result)
    raise AllocationError(ERR_FAILED)


class _Accumulator:
    def __init__(
        self,
        topo: CPUTopology,
        max_refs: int,
        available: Iterable[int],
        allocated: Mapping[int, AllocatedCPU],
        needed: int,
        exclusive_policy: str,
        strategy: str,
    ) -> None:
        self.topo = topo
        self.max_refs = max_refs
        self.free: dict[int, CPUInfo] = {c: topo.details[c] for c in available if c in topo.details}
        self.refs = {c: allocated[c].refs for c in self.free if c in allocated} if max_refs > 1 else {}
        self.exclusive_cores: set[int] = set()
        self.exclusive_nodes: set[int] = set()
        for cpu, a in allocated.items():
            info = topo.details.get(cpu)
            if info is None:
                continue
            if a.exclusive == CPUExclusivePolicy.PCPU_LEVEL:
                self.exclusive_cores.add(info.core)
            elif a.exclusive == CPUExclusivePolicy.NUMA_NODE_LEVEL:
                self.exclusive_nodes.add(info.node)
        self.policy = exclusive_policy
        self.exclusive = exclusive_policy in (
            CPUExclusivePolicy.PCPU_LEVEL,
            CPUExclusivePolicy.NUMA_NODE_LEVEL,
        )
        self.most = strategy == NUMAAllocateStrategy.MOST_ALLOCATED
        self.needed = needed
        self.result: set[int] = set()

    # ---- state ------------------------------------------------------------------------------------

    def take(self, cpus: Iterable[int]) -> None:
        for cpu in cpus:
            self.result.add(cpu)
            info = self.free.pop(cpu, None) or self.topo.details[cpu]
            if self.exclusive:
                if self.policy == CPUExclusivePolicy.PCPU_LEVEL:
                    self.exclusive_cores.add(info.core)
                else:
                    self.exclusive_nodes.add(info.node)
            self.needed -= 1

    def needs(self, n: int) -> bool:
        return self.needed >= n

    def satisfied(self) -> bool:
        return self.needed < 1

    def failed(self) -> bool:
        return self.needed > len(self.free)

    def _pcpu_exclusive(self, info: CPUInfo) -> bool:
        return self.policy == CPUExclusivePolicy.PCPU_LEVEL and info.core in self.exclusive_cores

    def _numa_exclusive(self, info: CPUInfo) -> bool:
        return self.policy == CPUExclusivePolicy.NUMA_NODE_LEVEL and info.node in self.exclusive_nodes

    def _order(self, free: int) -> int:
        """Sort key of a group's free count: the strategy's direction."""
        return free if self.most else -free

    def _core_refs(self, core: int) -> int:
        return sum(self.refs.get(c, 0) for c in self.topo.cpus_by_core.get(core, ()))

    def _by_refs(self, cpus: list[int]) -> list[int]:
        cpus.sort()
        if self.max_refs > 1:
            cpus.sort(key=lambda c: (self.refs.get(c, 0), c))
        return cpus

    def _one_per_core(self, cpus: list[int]) -> list[int]:
        seen: set[int] = set()
        out = []
        for c in cpus:
            core = self.topo.details[c].core
            if core not in seen:
                seen.add(core)
                out.append(c)
        return out

    def _cores_list(self, cores: list[int], in_core: Mapping[int, list[int]]) -> list[int]:
        """The CPUs of ``cores``, the fullest cores first (least referenced when CPUs are shared)."""

        def key(core: int) -> tuple[int, int, int]:
            return (-len(in_core[core]), self._core_refs(core) if self.max_refs > 1 else 0, core)

        out: list[int] = []
        for core in sorted(cores, key=key):
            out.extend(sorted(in_core[core]))
        return out

    # ---- groupings --------------------------------------------------------------------------------

    def free_cores_in_node(self, filter_exclusive: bool) -> list[list[int]]:
        """The free whole cores of each NUMA node, nodes ordered by the strategy."""
        in_core: dict[int, list[int]] = {}
        socket_free: dict[int, int] = {}
        for info in self.free.values():
            if filter_exclusive and self._numa_exclusive(info):
                continue
            in_core.setdefault(info.core, []).append(info.cpu)
            socket_free[info.socket] = socket_free.get(info.socket, 0) + 1
        per_core = self.topo.cpus_per_core()
        cores_in_node: dict[int, list[int]] = {}
        for core, cpus in in_core.items():
            if len(cpus) == per_core:
                cores_in_node.setdefault(self.free[cpus[0]].node, []).append(core)
        lists = {node: self._cores_list(cores, in_core) for node, cores in cores_in_node.items()}

        def key(node: int) -> tuple[int, int, int]:
            socket = self.free[lists[node][0]].socket
            return (self._order(len(lists[node])), self._order(socket_free[socket]), node)

        return [lists[n] for n in sorted(lists, key=key)]

    def free_cores_in_socket(self) -> list[list[int]]:
        """The free whole cores of each socket, sockets ordered by the strategy."""
        in_core: dict[int, list[int]] = {}
        for info in self.free.values():
            in_core.setdefault(info.core, []).append(info.cpu)
        per_core = self.topo.cpus_per_core()
        cores_in_socket: dict[int, list[int]] = {}
        for core, cpus in in_core.items():
            if len(cpus) == per_core:
                cores_in_socket.setdefault(self.free[cpus[0]].socket, []).append(core)
        lists = {s: self._cores_list(cores, in_core) for s, cores in cores_in_socket.items()}
        return [lists[s] for s in sorted(lists, key=lambda s: (self._order(len(lists[s])), s))]

    def free_cpus_in_node(self, filter_exclusive: bool) -> list[list[int]]:
        """The free CPUs of each NUMA node (one per core when avoiding exclusive ones), nodes ordered by
        the strategy over their free CPUs, then their sockets'."""
        in_node: dict[int, list[int]] = {}
        socket_free: dict[int, int] = {}
        node_socket: dict[int, int] = {}
        for info in self.free.values():
            if filter_exclusive and (self._pcpu_exclusive(info) or self._numa_exclusive(info)):
                continue
            in_node.setdefault(info.node, []).append(info.cpu)
            socket_free[info.socket] = socket_free.get(info.socket, 0) + 1
        node_free = {n: len(cpus) for n, cpus in in_node.items()}
        for node, members in in_node.items():
            cpus = self._by_refs(members)
            in_node[node] = self._one_per_core(cpus) if filter_exclusive else cpus
            node_socket[node] = self.free[cpus[0]].socket

        def key(node: int) -> tuple[int, int, int]:
            return (self._order(node_free[node]), self._order(socket_free[node_socket[node]]), node)

        return [in_node[n] for n in sorted(in_node, key=key)]

    def free_cpus_in_socket(self, filter_exclusive: bool) -> list[list[int]]:
        in_socket: dict[int, list[int]] = {}
        for info in self.free.values():
            if filter_exclusive and self._pcpu_exclusive(info):
                continue
            in_socket.setdefault(info.socket, []).append(info.cpu)
        for socket, members in in_socket.items():
            cpus = self._by_refs(members)
            in_socket[socket] = self._one_per_core(cpus) if filter_exclusive else cpus
        return [in_socket[s] for s in sorted(in_socket, key=lambda s: (self._order(len(in_socket[s])), s))]

    def free_cpus(self, filter_exclusive: bool) -> list[int]:
        """Every free CPU, core by core: cores on sockets already holding the result first, then by the
        strategy over socket and node free CPUs, the emptier core... (Koordinator's ``freeCPUs``)."""
        in_core: dict[int, list[int]] = {}
        core_info: dict[int, CPUInfo] = {}
        node_free: dict[int, int] = {}
        socket_free: dict[int, int] = {}
        for info in self.free.values():
            if filter_exclusive and (self._pcpu_exclusive(info) or self._numa_exclusive(info)):
                continue
            in_core.setdefault(info.core, []).append(info.cpu)
            core_info[info.core] = info
            node_free[info.node] = node_free.get(info.node, 0) + 1
            socket_free[info.socket] = socket_free.get(info.socket, 0) + 1
        colo = {s: len(self.topo.cpus_by_socket.get(s, frozenset()) & self.result) for s in socket_free}

        def key(core: int) -> tuple[int, ...]:
            info = core_info[core]
            return (
                -colo[info.socket],
                self._order(socket_free[info.socket]),
                self._order(node_free[info.node]),
                len(in_core[core]),
                info.socket,
                self._core_refs(core) if self.max_refs > 1 else 0,
                core,
            )

        out: list[int] = []
        for core in sorted(in_core, key=key):
            out.extend(self._by_refs(in_core[core]))
        return out

    def spread(self, cpus: list[int]) -> list[int]:
        """``cpus`` reordered one core at a time, round robin (each pass takes the first CPU left of
        every core), so taking a prefix spreads over physical cores."""
        if len(cpus) <= self.topo.cpus_per_core():
            return cpus
        out: list[int] = []
        left = list(cpus)
        while left:
            seen: set[int] = set()
            rest = []
            for c in left:
                core = self.topo.details[c].core
                if core in seen:
                    rest.append(c)
                else:
                    seen.add(core)
                    out.append(c)
            left = rest
        return out
