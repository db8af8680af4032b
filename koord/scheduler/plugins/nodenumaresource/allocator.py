"""Placing one pod on one node (Koordinator's ``resource_manager.go`` ``Allocate``,
``GetTopologyHints`` and ``plugin.go`` ``tryAllocateFromNode``, ``reservation.go``
``tryAllocateFromReusable``): NUMA resources within the affinity the topology manager chose, spread over
its NUMA nodes (the least available first, each its share of what is left), then CPUs (within those NUMA
nodes when there are some), and the hints: every set of NUMA nodes where that allocation succeeds.

:class:`ResourceOptions` is one attempt's input; the caller holds the resource manager's lock, so the
node's allocation does not change under it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields, replace
from typing import Any

from koord.scheduler.framework import Status
from koord.scheduler.framework.topologymanager import NUMATopologyHint, bits, mask_of
from koord.scheduler.plugins.nodenumaresource.accumulator import (
    ERR_NOT_ENOUGH_CPUS,
    AllocationError,
    take_preferred_cpus,
)
from koord.scheduler.plugins.nodenumaresource.allocation import (
    NodeAllocation,
    NUMAResources,
    PodAllocation,
    add,
    add_numa,
    numa_tuple,
    sub_floor,
)
from koord.scheduler.plugins.nodenumaresource.cputopology import CPUTopology
from koord.scheduler.plugins.nodenumaresource.restorestate import (
    NodeRestoreState,
    PreemptibleAlloc,
    ReusableAlloc,
)
from koord.scheduler.plugins.nodenumaresource.scoring import Scorer
from koord.scheduler.plugins.nodenumaresource.topologyoptions import TopologyOptions
from koordshared.apis.extension.numa import CPUBindPolicy, NUMATopologyPolicy

ERR_INSUFFICIENT_NUMA = "insufficient resources on NUMA Node"
RESERVATION_POLICY_RESTRICTED = "Restricted"


@dataclass(slots=True)
class ResourceOptions:
    uid: str
    namespace: str
    name: str
    requests: dict[str, int]
    num_cpus_needed: int
    request_cpu_bind: bool
    cpu_bind_policy: str
    required_cpu_bind_policy: bool
    cpu_exclusive_policy: str
    topology: TopologyOptions
    strategy: str
    """The node's NUMA allocate strategy (its label, else the plugin's default)."""
    hint: NUMATopologyHint = field(default_factory=NUMATopologyHint)
    preferred_cpus: frozenset[int] = frozenset()
    preemptible_cpus: frozenset[int] = frozenset()
    reusable: NUMAResources = field(default_factory=dict)
    required: NUMAResources | None = None
    required_from_reservation: bool = False
    numa_scorer: Scorer | None = None
    preemption: PreemptibleAlloc | None = None

    def derive(self, **changes: Any) -> ResourceOptions:
        """A copy with ``changes`` (``dataclasses.replace`` without its cost: this runs per NUMA mask)."""
        new = object.__new__(ResourceOptions)
        for name in _FIELDS:
            object.__setattr__(new, name, changes[name] if name in changes else getattr(self, name))
        return new


_FIELDS = tuple(f.name for f in fields(ResourceOptions))


def _required_policy_cpus(policy: str, cpus: frozenset[int], topo: CPUTopology) -> frozenset[int]:
    """``filterCPUsByRequiredCPUBindPolicy``: whole free cores only (FullPCPUs), or the first free CPU
    of each core (SpreadByPCPUs)."""
    if policy not in (CPUBindPolicy.FULL_PCPUS, CPUBindPolicy.SPREAD_BY_PCPUS):
        return cpus
    in_core: dict[int, list[int]] = {}
    for c in cpus:
        info = topo.details.get(c)
        if info is not None:
            in_core.setdefault(info.core, []).append(c)
    if policy == CPUBindPolicy.FULL_PCPUS:
        per_core = topo.cpus_per_core()
        return frozenset(c for cs in in_core.values() if len(cs) == per_core for c in cs)
    return frozenset(min(cs) for cs in in_core.values())


def _satisfies(policy: str, cpus: frozenset[int], topo: CPUTopology) -> bool:
    cores = topo.cores_of(cpus)
    if policy == CPUBindPolicy.FULL_PCPUS:
        return len(cores) * topo.cpus_per_core() == len(cpus)
    if policy == CPUBindPolicy.SPREAD_BY_PCPUS:
        return len(cores) == len(cpus)
    return True


def _trim(na: NodeAllocation, available: NUMAResources, opts: ResourceOptions) -> None:
    """Under a required bind policy, a NUMA node's cpu is only as much as its CPUs fit the policy."""
    if not opts.required_cpu_bind_policy:
        return
    topo = opts.topology
    free, _ = na.available_cpus(
        topo.topology, topo.max_refs, topo.reserved_cpus, opts.preferred_cpus, opts.preemptible_cpus
    )
    for node, res in available.items():
        cpu = res.get("cpu", 0)
        if not cpu:
            continue
        fit = _required_policy_cpus(
            opts.cpu_bind_policy, free & topo.topology.cpus_in_nodes(node), topo.topology
        )
        res["cpu"] = min(cpu, len(fit) * 1000)


def _split(name: str, left: int, count: int, opts: ResourceOptions) -> int:
    """The share of ``left`` one of ``count`` NUMA nodes takes (``splitQuantity``): whole CPUs (whole
    cores under a required FullPCPUs) for a pod with bound CPUs."""
    if name != "cpu" or not opts.request_cpu_bind:
        return left // count
    cores = -(-left // 1000)
    if opts.required_cpu_bind_policy and opts.cpu_bind_policy == CPUBindPolicy.FULL_PCPUS:
        per_core = opts.topology.topology.cpus_per_core() or 1
        return cores // per_core // count * per_core * 1000
    return cores // count * 1000


def _by_hint(na: NodeAllocation, opts: ResourceOptions) -> tuple[NUMAResources, Status | None]:
    """The pod's requests spread over the NUMA nodes of the hint (``allocateResourcesByHint``)."""
    if not opts.topology.numa_resources:
        return {}, Status.unresolvable(ERR_INSUFFICIENT_NUMA)
    if opts.required:
        total = {n: dict(r) for n, r in opts.required.items()}
    else:
        total, _ = na.available_numa(opts.topology.numa_resources, opts.reusable)
    _trim(na, total, opts)
    names = {k for res in total.values() for k in res}
    nodes = opts.hint.nodes()
    result: NUMAResources = {}
    reasons = []
    for name in sorted(opts.requests):
        left = opts.requests[name]
        order = sorted(nodes, key=lambda n: total.get(n, {}).get(name, 0)) if name in names else []
        for i, node in enumerate(order):
            share = _split(name, left, len(nodes) - i, opts)
            taken = min(total.get(node, {}).get(name, 0), share)
            if taken > 0:
                result.setdefault(node, {})[name] = taken
                left -= taken
        if name in names and left != 0:
            reasons.append(f"Insufficient NUMA {name}")
    if reasons:
        return {}, Status.unschedulable(*reasons)
    return result, None


def _cpuset(na: NodeAllocation, numa: NUMAResources, opts: ResourceOptions) -> frozenset[int]:
    """``allocateCPUSet``: the pod's CPUs, within its NUMA nodes when it has some."""
    topo = opts.topology
    free, held = na.available_cpus(
        topo.topology, topo.max_refs, topo.reserved_cpus, opts.preferred_cpus, opts.preemptible_cpus
    )
    if opts.required_cpu_bind_policy:
        free = _required_policy_cpus(opts.cpu_bind_policy, free, topo.topology)
    if len(free) < opts.num_cpus_needed:
        raise AllocationError(ERR_NOT_ENOUGH_CPUS)
    args = (opts.cpu_bind_policy, opts.cpu_exclusive_policy, opts.strategy)
    needed = opts.num_cpus_needed
    result: frozenset[int] = frozenset()
    if numa:
        for node in sorted(numa):
            here = free & topo.topology.cpus_in_nodes(node)
            n = min(len(here), numa[node].get("cpu", 0) // 1000)
            result |= take_preferred_cpus(
                topo.topology, topo.max_refs, here, opts.preferred_cpus, held, n, *args
            )
        needed -= len(result)
        if needed != 0:
            raise AllocationError(ERR_NOT_ENOUGH_CPUS)
    if needed > 0:
        result |= take_preferred_cpus(
            topo.topology, topo.max_refs, free - result, opts.preferred_cpus, held, needed, *args
        )
    if opts.required_cpu_bind_policy and not _satisfies(opts.cpu_bind_policy, result, topo.topology):
        raise AllocationError(f"insufficient CPUs to satisfy required cpu bind policy {opts.cpu_bind_policy}")
    return result


def allocate(na: NodeAllocation, opts: ResourceOptions) -> tuple[PodAllocation | None, Status | None]:
    """The pod's NUMA resources (when the options carry an affinity) and CPUs (when it binds CPUs)."""
    numa: NUMAResources = {}
    if opts.hint.affinity is not None:
        numa, st = _by_hint(na, opts)
        if st is not None:
            return None, st
    cpus: frozenset[int] = frozenset()
    if opts.request_cpu_bind:
        try:
            cpus = _cpuset(na, numa, opts)
        except AllocationError as err:
            return None, Status.unschedulable(str(err))
    return (
        PodAllocation(opts.uid, opts.namespace, opts.name, cpus, opts.cpu_exclusive_policy, numa_tuple(numa)),
        None,
    )


def from_node(
    na: NodeAllocation, opts: ResourceOptions, restore: NodeRestoreState
) -> tuple[PodAllocation | None, Status | None]:
    """``tryAllocateFromNode``: from what the node has free; reservations keep what they hold (their
    owners' share given back, as the owners are counted themselves), victims of a what-if give theirs."""
    reusable = add_numa(restore.unmatched_used, restore.matched_allocated)
    preemptible: frozenset[int] = frozenset()
    if opts.preemption is not None:
        reusable = opts.preemption.numa_with(reusable)
        preemptible = opts.preemption.cpus()
    return allocate(
        na,
        opts.derive(
            required=None, reusable=reusable, preferred_cpus=frozenset(), preemptible_cpus=preemptible
        ),
    )


def from_reusable(
    na: NodeAllocation, opts: ResourceOptions, restore: NodeRestoreState, allocs: dict[str, ReusableAlloc]
) -> tuple[PodAllocation | None, Status | None]:
    """``tryAllocateFromReusable``: from one of the pod's matched reservations (``Aligned``: its CPUs
    first, the node's after; ``Restricted``: its CPUs and NUMA share only). ``(None, None)``: none fits
    and the pod may still use the node's free resources."""
    if not allocs:
        return None, None
    base = add_numa(restore.unmatched_used, restore.matched_allocated)
    preemptible: frozenset[int] = frozenset()
    if opts.preemption is not None:
        base = opts.preemption.numa_with(base)
        preemptible = opts.preemption.cpus()
    failures: list[Status] = []
    for alloc in allocs.values():
        attempt = opts.derive(
            reusable=add_numa(base, alloc.remained),
            preferred_cpus=restore.matched_allocated_cpus | alloc.remained_cpus,
            preemptible_cpus=preemptible,
            required=None,
        )
        result, st = allocate(na, attempt)
        if st is not None:
            failures.append(st)
            continue
        if alloc.allocate_policy != RESERVATION_POLICY_RESTRICTED:
            return result, None
        reserved = alloc.remained_cpus
        if opts.request_cpu_bind and opts.num_cpus_needed > len(reserved):
            failures.append(Status.unschedulable(ERR_NOT_ENOUGH_CPUS))
            continue
        restricted = attempt.derive(
            required=dict(alloc.remained), preferred_cpus=reserved, preemptible_cpus=frozenset()
        )
        result, st = allocate(na, restricted)
        if st is not None:
            failures.append(st)
            continue
        if result is not None and len(result.cpus) > len(reserved):
            failures.append(Status.unschedulable(ERR_NOT_ENOUGH_CPUS))
            continue
        return result, None
    if opts.required_from_reservation:
        return None, Status.unschedulable(*(f"Reservation(s) {r}" for st in failures for r in st.reasons))
    return None, None


def topology_hints(
    na: NodeAllocation, opts: ResourceOptions, policy: NUMATopologyPolicy, restore: NodeRestoreState
) -> dict[str, list[NUMATopologyHint]]:
    """``GetTopologyHints``: for each NUMA-managed resource the pod requests, the sets of NUMA nodes
    where the whole pod can be placed (each scored by the NUMA scorer); the narrowest ones are preferred
    (every one under ``Restricted``). Raises :class:`AllocationError` when the node has no NUMA
    resources."""
    numa_resources = opts.topology.numa_resources
    if not numa_resources:
        raise AllocationError(ERR_INSUFFICIENT_NUMA)
    reusable = add_numa(restore.unmatched_used, restore.matched_allocatable)
    preemptible: frozenset[int] = frozenset()
    if opts.preemption is not None:
        reusable = opts.preemption.numa_with(reusable)
        preemptible = opts.preemption.cpus()
    base = opts.derive(
        reusable=reusable, preferred_cpus=restore.matched_remain_cpus, preemptible_cpus=preemptible
    )
    available, _ = na.available_numa(numa_resources, base.reusable)
    _trim(na, available, base)
    totals = dict(numa_resources)
    names = {k for _, res in numa_resources for k in res}
    lacking = {name: {n for n, res in available.items() if not res.get(name)} for name in names}
    min_size = {name: len(numa_resources) for name in opts.requests}
    hints: dict[str, list[NUMATopologyHint]] = {}
    hinted: set[str] = set()
    nodes = [n for n, _ in numa_resources]
    for size in range(1, len(nodes) + 1):
        for combo in itertools.combinations(nodes, size):
            mask = mask_of(combo)
            free: dict[str, int] = {}
            total: dict[str, int] = {}
            for n in combo:
                free = add(free, available.get(n, {}))
                total = add(total, totals[n])
            hinted |= {name for name in opts.requests if name in total}
            score = 0
            if opts.numa_scorer is not None:
                score = opts.numa_scorer.score(sub_floor(total, free), total, opts.requests)
            attempt = base.derive(hint=NUMATopologyHint(mask), required=None)
            result, st = from_reusable(na, attempt, restore, restore.matched)
            if st is not None:
                continue
            if result is None:
                _, st = from_node(na, attempt, restore)
                if st is not None:
                    continue
            for name in sorted(hinted):
                if lacking.get(name, set()) & set(combo):
                    continue
                min_size[name] = min(min_size.get(name, size), size)
                hints.setdefault(name, []).append(NUMATopologyHint(mask, score=score))
    out: dict[str, list[NUMATopologyHint]] = {}
    for name in opts.requests:
        if name in hints:
            restricted = policy is NUMATopologyPolicy.RESTRICTED
            out[name] = [
                replace(h, preferred=restricted or len(bits(h.affinity or 0)) == min_size[name])
                for h in hints[name]
            ]
        elif name in hinted:
            out[name] = []
    return out
