"""A topology manager for the scheduler (Koordinator's ``frameworkext/topologymanager``, after the
kubelet's): plugins that place a pod's resources on NUMA nodes (NodeNUMAResource; DeviceShare for
devices) give NUMA hints per resource, the node's NUMA topology policy merges them into one affinity,
and the providers then allocate within it. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from koord.scheduler.framework.interface import CycleState, Status
from koord.scheduler.framework.types import Obj
from koordshared.apis.extension.numa import NUMATopologyPolicy

STORE_KEY = "koordinator.sh/topology-affinity-store"
ERR_UNSATISFIED = "Unsatisfied NUMA {}"
ERR_UNALIGNED = "Unaligned NUMA Hint cause {}"
EXCLUSIVE_REQUIRED = "Required"
NUMA_SINGLE, NUMA_SHARED = "single", "shared"


def mask_of(nodes: Iterable[int]) -> int:
    out = 0
    for n in nodes:
        out |= 1 << n
    return out


def bits(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def mask_str(mask: int) -> str:
    """Go's ``bitMask.String()``: binary, zero-padded to an even width."""
    for shift in range(62, 0, -2):
        if mask > 1 << shift:
            return format(mask, f"0{shift + 2}b")
    return format(mask, "02b")


def narrower(a: int, b: int) -> bool:
    """``IsNarrowerThan``: fewer NUMA nodes, or as many with lower-numbered ones."""
    ca, cb = a.bit_count(), b.bit_count()
    return a < b if ca == cb else ca < cb


@dataclass(frozen=True, slots=True)
class NUMATopologyHint:
    affinity: int | None = None
    """The NUMA nodes as a bitmask; ``None``: no preference (any)."""
    preferred: bool = False
    unsatisfied: bool = False
    score: int = 0

    def nodes(self) -> list[int]:
        return bits(self.affinity) if self.affinity is not None else []


Hints = Mapping[str, Sequence[NUMATopologyHint] | None]
"""Resource -> its hints; ``None`` for a resource: no preference; ``[]``: it fits no NUMA node."""


class NUMATopologyHintProvider(Protocol):
    def get_pod_topology_hints(
        self, state: CycleState, pod: Obj, node: Obj
    ) -> tuple[Hints | None, Status | None]:
        """The pod's hints on ``node``; a status: the node cannot take it (its message is the reason)."""

    def allocate(self, state: CycleState, affinity: NUMATopologyHint, pod: Obj, node: Obj) -> Status | None:
        """Whether the provider's resources fit in ``affinity`` (after every hint was merged)."""


class SharedAffinities(Protocol):
    """Affinities chosen once for many nodes (a provider's nodes alike for the pod), looked up by node."""

    def get(self, node: str) -> NUMATopologyHint | None: ...


class Store:
    """The affinity chosen per node in this cycle: set node by node, or for many nodes at once
    (:attr:`shared`, which a node's own entry overrides)."""

    def __init__(self) -> None:
        self.affinity: dict[str, NUMATopologyHint] = {}
        self.shared: SharedAffinities | None = None

    def get_affinity(self, node: str) -> NUMATopologyHint | None:
        got = self.affinity.get(node)
        if got is None and self.shared is not None:
            return self.shared.get(node)
        return got

    def set_affinity(self, node: str, affinity: NUMATopologyHint) -> None:
        self.affinity[node] = affinity

    def clone(self) -> Store:
        return Store()


def init_store(state: CycleState) -> None:
    state.write(STORE_KEY, Store())


def store(state: CycleState) -> Store:
    s = state.get(STORE_KEY)
    if not isinstance(s, Store):
        s = Store()
        state.write(STORE_KEY, s)
    return s


# ---- merging -----------------------------------------------------------------------------------------


def _exclusive_ok(hint: NUMATopologyHint, exclusive: str, states: Mapping[int, str]) -> bool:
    if hint.affinity is None:
        return False
    if exclusive == EXCLUSIVE_REQUIRED:
        nodes = bits(hint.affinity)
        if len(nodes) > 1:
            return not any(states.get(n) == NUMA_SINGLE for n in nodes)
        return states.get(nodes[0]) != NUMA_SHARED
    return True


def _merge_permutation(default: int, permutation: Sequence[NUMATopologyHint]) -> NUMATopologyHint:
    preferred = True
    satisfied = True
    affinities = [h.affinity for h in permutation if h.affinity is not None]
    for h in permutation:
        if h.affinity is not None and h.affinity != affinities[0]:
            preferred = False
        if not h.preferred:
            preferred = False
        if h.unsatisfied:
            satisfied = False
    merged = default
    for a in affinities:
        merged &= a
    widest = max((a.bit_count() for a in affinities), default=0)
    satisfied = (not affinities or widest == merged.bit_count()) and satisfied
    return NUMATopologyHint(merged, preferred, not satisfied)


def _filter_providers(
    providers: Sequence[Hints | None],
) -> tuple[list[list[NUMATopologyHint]], list[str], list[str]]:
    """Every resource's hint list, the resources that fit nowhere, and a summary of the hints."""
    all_hints: list[list[NUMATopologyHint]] = []
    reasons: list[str] = []
    summary: list[str] = []
    for hints in providers:
        if not hints:
            all_hints.append([NUMATopologyHint(preferred=True)])
            continue
        for resource in sorted(hints):
            got = hints[resource]
            if got is None:
                all_hints.append([NUMATopologyHint(preferred=True)])
            elif not got:
                all_hints.append([NUMATopologyHint(unsatisfied=True)])
                reasons.append(ERR_UNSATISFIED.format(resource))
            else:
                summary.append(_summary(resource, got))
                all_hints.append(list(got))
    summary.sort()
    return all_hints, reasons, summary


def _summary(resource: str, hints: Sequence[NUMATopologyHint]) -> str:
    preferred, possible = [], []
    for h in hints:
        if h.unsatisfied:
            continue
        text = mask_str(h.affinity) if h.affinity is not None else "<nil>"
        if h.preferred:
            preferred.append(text)
        possible.append(text)
    return f"{resource} prefer [{' '.join(preferred)}] among [{' '.join(possible)}]"


def _merge_filtered(
    numa_nodes: Sequence[int],
    filtered: Sequence[Sequence[NUMATopologyHint]],
    exclusive: str,
    states: Mapping[int, str],
) -> NUMATopologyHint:
    default = mask_of(numa_nodes)
    best = NUMATopologyHint(default)
    for permutation in itertools.product(*filtered):
        merged = _merge_permutation(default, permutation)
        mask = merged.affinity or 0
        if mask.bit_count() == 0:
            continue
        if not _exclusive_ok(merged, exclusive, states):
            merged = replace(merged, preferred=False)
        score = sum(h.score for h in permutation if h.affinity is not None and h.affinity == merged.affinity)
        merged = replace(merged, score=merged.score + score)
        if merged.preferred and not best.preferred:
            best = merged
            continue
        if not merged.preferred and best.preferred:
            continue
        best_mask = best.affinity or 0
        if not narrower(mask, best_mask):
            if mask.bit_count() == best_mask.bit_count() and merged.score > best.score:
                best = merged
            continue
        best = merged
    return best


def merge(
    policy: NUMATopologyPolicy,
    numa_nodes: Sequence[int],
    providers: Sequence[Hints | None],
    exclusive: str,
    states: Mapping[int, str],
) -> tuple[NUMATopologyHint, bool, list[str]]:
    """``(best hint, admitted, reasons)`` under ``policy`` (Koordinator's policies' ``Merge``)."""
    filtered, reasons, summary = _filter_providers(providers)
    if policy is NUMATopologyPolicy.BEST_EFFORT:
        best = _merge_filtered(numa_nodes, filtered, exclusive, states)
        if best.unsatisfied:
            best = NUMATopologyHint(mask_of(numa_nodes))
        return best, True, []
    if policy is NUMATopologyPolicy.RESTRICTED:
        if reasons:
            return NUMATopologyHint(mask_of(numa_nodes)), False, reasons
        best = _merge_filtered(numa_nodes, filtered, exclusive, states)
        if not best.preferred:
            return best, False, [ERR_UNALIGNED.format(" & ".join(summary))]
        return best, True, []
    if policy is NUMATopologyPolicy.SINGLE_NUMA_NODE:
        if reasons:
            return NUMATopologyHint(), False, reasons
        single = [
            [h for h in hs if h.preferred and (h.affinity is None or h.affinity.bit_count() == 1)]
            for hs in filtered
        ]
        best = _merge_filtered(numa_nodes, single, exclusive, states)
        if best.affinity == mask_of(numa_nodes):
            best = NUMATopologyHint(preferred=best.preferred)
        if not best.preferred:
            return best, False, [ERR_UNALIGNED.format(",".join(summary))]
        return best, True, []
    return NUMATopologyHint(), True, []


def admit(
    state: CycleState,
    pod: Obj,
    node: Obj,
    numa_nodes: Sequence[int],
    policy: NUMATopologyPolicy,
    exclusive: str,
    states: Mapping[int, str],
    providers: Sequence[NUMATopologyHintProvider],
) -> Status | None:
    """Koordinator's ``topologyManager.Admit``: the merged affinity of the providers' hints on ``node``
    (computed once per node and cycle, kept in the store), then each provider allocates within it."""
    name = str((node.get("metadata") or {}).get("name") or "")
    s = store(state)
    best = s.get_affinity(name)
    if best is None:
        hints: list[Hints | None] = []
        reasons: list[str] = []
        for p in providers:
            got, st = p.get_pod_topology_hints(state, pod, node)
            if st is not None and not st.is_success:
                reasons.append(st.message)
                continue
            hints.append(got)
        if reasons:
            return Status.unschedulable(*reasons)
        best, admitted, reasons = merge(policy, numa_nodes, hints, exclusive, states)
        if not admitted and reasons:
            return Status.unschedulable(*reasons)
        for p in providers:
            st = p.allocate(state, best, pod, node)
            if st is not None and not st.is_success:
                return st
        s.set_affinity(name, best)
        return None
    for p in providers:
        st = p.allocate(state, best, pod, node)
        if st is not None and not st.is_success:
            return st
    return None
