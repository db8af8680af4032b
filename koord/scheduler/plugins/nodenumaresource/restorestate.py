"""What a cycle may take back on a node beyond its free CPUs and NUMA resources (Koordinator's
``reservation.go`` restore state and ``preempt.go``):

- the reservations on the node: those matched to the pod being scheduled hold CPUs and NUMA resources it
  may use (their *remained* share: reserved less what their owners already took), the others only give
  back what their owners already took (the owners are counted on the node themselves);
- the pods preemption would remove in a what-if (their CPUs and NUMA resources become free), and those it
  would add back.

Plain values, filled by the reservation hooks and the PreFilter extensions, read by the allocator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord.scheduler.plugins.nodenumaresource.allocation import NUMAResources, add_numa


def sub_numa(a: Mapping[int, Mapping[str, int]], b: Mapping[int, Mapping[str, int]]) -> NUMAResources:
    """``a - b`` per NUMA node and resource (may go negative: a reservation over-used by its owners)."""
    out: NUMAResources = {n: dict(r) for n, r in a.items()}
    for node, res in b.items():
        into = out.setdefault(node, {})
        for k, v in res.items():
            into[k] = into.get(k, 0) - v
    return out


def floor_numa(a: Mapping[int, Mapping[str, int]]) -> NUMAResources:
    return {n: {k: max(v, 0) for k, v in r.items()} for n, r in a.items()}


@dataclass(frozen=True, slots=True)
class ReusableAlloc:
    """One reservation's fine-grained holding on the node."""

    reservation: Any
    """The reservation (the Reservation plugin's ReservationInfo)."""
    uid: str
    allocate_policy: str = ""
    allocatable_cpus: frozenset[int] = frozenset()
    allocated_cpus: frozenset[int] = frozenset()
    remained_cpus: frozenset[int] = frozenset()
    allocatable: NUMAResources = field(default_factory=dict)
    allocated: NUMAResources = field(default_factory=dict)
    remained: NUMAResources = field(default_factory=dict)


@dataclass(slots=True)
class NodeRestoreState:
    matched: dict[str, ReusableAlloc] = field(default_factory=dict)
    unmatched: dict[str, ReusableAlloc] = field(default_factory=dict)
    matched_remain_cpus: frozenset[int] = frozenset()
    matched_allocated_cpus: frozenset[int] = frozenset()
    matched_allocatable: NUMAResources = field(default_factory=dict)
    matched_allocated: NUMAResources = field(default_factory=dict)
    unmatched_used: NUMAResources = field(default_factory=dict)

    def merge(self) -> NodeRestoreState:
        """Fill the merged figures (``mergeReservationAllocations``); returns itself."""
        used = [floor_numa(sub_numa(a.allocatable, a.remained)) for a in self.unmatched.values()]
        self.unmatched_used = add_numa(*used)
        self.matched_allocatable = add_numa(*(a.allocatable for a in self.matched.values()))
        self.matched_allocated = add_numa(*(a.allocated for a in self.matched.values()))
        remain: frozenset[int] = frozenset()
        allocated: frozenset[int] = frozenset()
        for a in self.matched.values():
            remain |= a.remained_cpus
            allocated |= a.allocated_cpus
        self.matched_remain_cpus, self.matched_allocated_cpus = remain, allocated
        return self


EMPTY_RESTORE = NodeRestoreState()


@dataclass(slots=True)
class PreemptibleAlloc:
    """CPUs and NUMA resources a preemption what-if frees (``cpus_to_add``) or takes again."""

    cpus_to_add: frozenset[int] = frozenset()
    cpus_to_remove: frozenset[int] = frozenset()
    numa: NUMAResources = field(default_factory=dict)

    def clone(self) -> PreemptibleAlloc:
        return PreemptibleAlloc(
            self.cpus_to_add, self.cpus_to_remove, {n: dict(r) for n, r in self.numa.items()}
        )

    def cpus(self, base: frozenset[int] = frozenset()) -> frozenset[int]:
        return (base | self.cpus_to_add) - self.cpus_to_remove

    def numa_with(self, base: Mapping[int, Mapping[str, int]]) -> NUMAResources:
        return add_numa(self.numa, base)

    def freed(self, cpus: frozenset[int], numa: Mapping[int, Mapping[str, int]]) -> None:
        """A victim removed: its holding becomes available."""
        if numa:
            self.numa = add_numa(self.numa, numa)
        if cpus:
            back = self.cpus_to_remove & cpus
            self.cpus_to_remove -= back
            self.cpus_to_add |= cpus - back

    def taken(self, cpus: frozenset[int], numa: Mapping[int, Mapping[str, int]]) -> None:
        """A pod added back: its holding is not available after all."""
        if numa:
            self.numa = sub_numa(self.numa, numa)
        if cpus:
            back = self.cpus_to_add & cpus
            self.cpus_to_add -= back
            self.cpus_to_remove |= cpus - back
