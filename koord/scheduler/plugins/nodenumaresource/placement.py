"""NodeNUMAResource's Filter and Score (Koordinator's ``plugin.go`` ``Filter``, ``scoring.go``,
``topology_hint.go``), and its part as the topology manager's hint provider.

A pod is looked at node by node only where something calls for it: a node whose labels or report steer
binding or NUMA placement, a pod with a NUMA policy or a required bind policy; elsewhere a pod binding
CPUs needs the node's topology and a pod binding none passes, and the score is the node-level resource
score over the snapshot's arrays. NUMA admissions and scores are memoised by what they depend on (the
node's report and holding, the pod's shape), so a deployment's replicas over identical nodes compute
each once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from koord.apis.numa import (
    LABEL_NODE_CPU_BIND_POLICY,
    LABEL_NUMA_TOPOLOGY_POLICY,
    CPUBindPolicy,
    NodeCPUBindPolicy,
    NUMATopologyPolicy,
)
from koord.scheduler.framework import SKIP, CycleState, NodeInfo, NodeSet, Obj, PodInfo, Status
from koord.scheduler.framework import topologymanager as tm
from koord.scheduler.plugins.nodenumaresource import allocator
from koord.scheduler.plugins.nodenumaresource.accumulator import AllocationError
from koord.scheduler.plugins.nodenumaresource.allocation import NodeAllocation, PodAllocation, add, add_numa
from koord.scheduler.plugins.nodenumaresource.manager import ResourceManager
from koord.scheduler.plugins.nodenumaresource.memo import Memo
from koord.scheduler.plugins.nodenumaresource.podstate import (
    ERR_CPU_BIND_POLICY_CONFLICT,
    ERR_CPU_TOPOLOGY_NOT_FOUND,
    ERR_INSUFFICIENT_NUMA_NODE,
    ERR_INVALID_CPU_TOPOLOGY,
    ERR_MISSING_NUMA,
    ERR_SMT_ALIGNMENT,
    PreFilterState,
    cpu_bind_policy,
    merge_numa_policy,
    request_cpu_bind,
)
from koord.scheduler.plugins.nodenumaresource.reservation import ReservationHooks
from koord.scheduler.plugins.nodenumaresource.restorestate import EMPTY_RESTORE, NodeRestoreState
from koord.scheduler.plugins.nodenumaresource.scoring import Scorer
from koord.scheduler.plugins.nodenumaresource.topologyoptions import (
    TopologyOptions,
    node_cpu_bind_policy,
    numa_policy_of,
)

STATE_KEY = "NodeNUMAResource"
_LABELLED = "NodeNUMAResource/labelled"


def labels_of(node: Obj) -> Mapping[str, str]:
    """The node's labels as the API server keeps them (strings: it refuses anything else), not copied:
    this is read several times per node and pod."""
    return cast(Mapping[str, str], (node.get("metadata") or {}).get("labels") or {})


def node_name(node: Obj) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def _labelled(ni: NodeInfo) -> bool:
    """Whether the node's labels steer binding or NUMA placement (then every pod needs a look)."""
    labels = labels_of(ni.node or {})
    return bool(labels.get(LABEL_NUMA_TOPOLOGY_POLICY)) or labels.get(LABEL_NODE_CPU_BIND_POLICY, "") in (
        NodeCPUBindPolicy.FULL_PCPUS_ONLY,
        NodeCPUBindPolicy.SPREAD_BY_PCPUS,
    )


def state_of(state: CycleState) -> PreFilterState:
    got = state.get(STATE_KEY)
    return got if isinstance(got, PreFilterState) else PreFilterState(skip=True)


class Placement(ReservationHooks):
    """Filter, Score and the hint provider, mixed into the plugin (which sets these attributes)."""

    manager: ResourceManager
    scorer: Scorer
    numa_scorer: Scorer
    memo: Memo

    @staticmethod
    def _state(state: CycleState) -> PreFilterState:
        return state_of(state)

    # ---- what a node means for the pod --------------------------------------------------------------

    def _policies(
        self, s: PreFilterState, node: Obj, opts: TopologyOptions
    ) -> tuple[NUMATopologyPolicy, str, bool, Status | None]:
        """``(NUMA policy, node bind policy, binds CPUs, why the node cannot take the pod)``."""
        labels = labels_of(node)
        policy, st = merge_numa_policy(numa_policy_of(labels, opts.numa_policy), s.pod_numa_policy)
        node_bind = node_cpu_bind_policy(labels, opts.kubelet_policy)
        if st is not None:
            return policy, node_bind, False, st
        binds, st = request_cpu_bind(s, node_bind)
        return policy, node_bind, binds, st

    def options(
        self,
        s: PreFilterState,
        node: Obj,
        binds: bool,
        opts: TopologyOptions,
        hint: tm.NUMATopologyHint | None = None,
    ) -> allocator.ResourceOptions:
        """The allocator's input for ``node`` (``getResourceOptions``)."""
        node_bind = node_cpu_bind_policy(labels_of(node), opts.kubelet_policy)
        policy, required = cpu_bind_policy(s, node_bind)
        name = node_name(node)
        return allocator.ResourceOptions(
            uid="",
            namespace="",
            name="",
            requests=s.requests,
            num_cpus_needed=s.num_cpus_needed,
            request_cpu_bind=binds,
            cpu_bind_policy=policy,
            required_cpu_bind_policy=required,
            cpu_exclusive_policy=s.preferred_cpu_exclusive_policy,
            topology=opts,
            strategy=self.manager.strategy(node),
            hint=hint or tm.NUMATopologyHint(),
            required_from_reservation=s.has_reservation_affinity,
            preemption=s.preemption[name].clone() if name in s.preemption else None,
        )

    def _try(
        self, state: CycleState, pod: Obj, node: Obj, ro: allocator.ResourceOptions
    ) -> tuple[PodAllocation | None, Status | None]:
        """A placement from the pod's reservation on the node, else from the node's free resources."""
        name = node_name(node)
        restore = self.restore_state(state, name)
        na = self.manager.allocation(name)
        result, st = self.allocate_with_nominated(state, pod, name, na, ro, restore)
        if st is not None or result is not None:
            return result, st
        return allocator.from_node(na, ro, restore)

    # ---- Filter -------------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        s = self._state(state)
        if s.skip:
            return None
        node = node_info.node
        if node is None:
            return Status.error("node not found")
        opts = self.manager.options(node_info.name)
        policy, node_bind, binds, st = self._policies(s, node, opts)
        if st is not None:
            return st
        if binds:
            if not opts.topology.valid:
                return Status.unresolvable(
                    ERR_INVALID_CPU_TOPOLOGY if opts.reported else ERR_CPU_TOPOLOGY_NOT_FOUND
                )
            required = s.required_cpu_bind_policy
            if node_bind == NodeCPUBindPolicy.FULL_PCPUS_ONLY:
                required = CPUBindPolicy.FULL_PCPUS
            elif node_bind == NodeCPUBindPolicy.SPREAD_BY_PCPUS:
                required = CPUBindPolicy.SPREAD_BY_PCPUS
            if s.required_cpu_bind_policy and s.required_cpu_bind_policy != required:
                return Status.unresolvable(ERR_CPU_BIND_POLICY_CONFLICT)
            if required == CPUBindPolicy.FULL_PCPUS and s.num_cpus_needed % opts.topology.cpus_per_core():
                return Status.unresolvable(ERR_SMT_ALIGNMENT)
            if required and policy is NUMATopologyPolicy.NONE:
                ro = self.options(s, node, binds, opts)
                with self.manager.locked():
                    restore = self.restore_state(state, node_info.name)
                    na = self.manager.allocation(node_info.name)
                    alloc, st = allocator.from_reusable(na, ro, restore, restore.matched)
                    if st is not None or alloc is not None:
                        return st
                    return allocator.from_node(na, ro, restore)[1]
        if policy not in (NUMATopologyPolicy.NONE, NUMATopologyPolicy.BEST_EFFORT):
            return self.filter_by_numa(state, pod, node, policy, s.exclusive_for(), opts)
        return None

    def filter_nodes(
        self, state: CycleState, pod: Obj, nodes: NodeSet
    ) -> Sequence[Status | None] | np.ndarray:
        """What ``filter`` answers, node by node only where the node (its labels, its report) or the pod
        (a NUMA policy, a required bind policy) calls for a look: elsewhere a pod binding CPUs needs a
        valid topology, and a pod binding none passes."""
        s = self._state(state)
        if s.skip:
            return np.ones(len(nodes), dtype=bool)
        labelled = nodes.column(_LABELLED, _labelled, bool)
        if labelled is None or s.pod_numa_policy is not NUMATopologyPolicy.NONE or s.required_cpu_bind_policy:
            return [self.filter(state, pod, ni) for ni in nodes]
        look = labelled | self._among(nodes, self.manager.steering())
        out = (
            self._among(nodes, self.manager.valid())
            if s.request_cpu_bind
            else np.ones(len(nodes), dtype=bool)
        )
        for i in np.flatnonzero(look).tolist():
            out[i] = self.filter(state, pod, nodes.info(i)) is None
        return out

    @staticmethod
    def _among(nodes: NodeSet, names: frozenset[str]) -> np.ndarray:
        if not names:
            return np.zeros(len(nodes), dtype=bool)
        return np.fromiter((ni.name in names for ni in nodes.infos), dtype=bool, count=len(nodes))

    def filter_by_numa(
        self,
        state: CycleState,
        pod: Obj,
        node: Obj,
        policy: NUMATopologyPolicy,
        exclusive: str,
        opts: TopologyOptions,
    ) -> Status | None:
        """The topology manager's admission on ``node`` (``FilterByNUMANode``)."""
        numa_nodes = opts.numa_nodes()
        if not numa_nodes:
            return Status.unresolvable(ERR_MISSING_NUMA)
        name = node_name(node)
        with self.manager.locked():
            na = self.manager.allocation(name)
            store = tm.store(state)
            # once this cycle chose the node's affinity, admitting again only checks the allocation
            key = (
                None
                if name in store.affinity
                else self._memo_key(state, name, node, na, opts, "admit", policy, exclusive)
            )
            if key is not None:
                hit = self.memo.get(key)
                if hit is not None:
                    st, best = hit
                    if best is not None:
                        store.affinity[name] = best
                    return st  # type: ignore[no-any-return]
            states = na.numa_states(opts.topology, numa_nodes)
            st = tm.admit(state, pod, node, numa_nodes, policy, exclusive, states, [self])
            if key is not None:
                self.memo.put(key, (st, store.affinity.get(name)))
            return st

    def _memo_key(
        self, state: CycleState, name: str, node: Obj, na: NodeAllocation, opts: TopologyOptions, *what: Any
    ) -> tuple[Any, ...] | None:
        """What a NUMA decision on this node depends on, so that nodes and cycles alike share it (a
        deployment's replicas over identical nodes); ``None`` when reservations or a preemption what-if
        are in play."""
        s = self._state(state)
        if name in s.preemption or self.restore_state(state, name) is not EMPTY_RESTORE:
            return None
        labels = labels_of(node)
        steer = (labels.get(LABEL_NODE_CPU_BIND_POLICY, ""), self.manager.strategy(node))
        return (*what, opts.fingerprint, na.fingerprint(), s.memo_key(), steer)

    # ---- the topology manager's hint provider --------------------------------------------------------

    def get_pod_topology_hints(
        self, state: CycleState, pod: Obj, node: Obj
    ) -> tuple[tm.Hints | None, Status | None]:
        s = self._state(state)
        name = node_name(node)
        opts = self.manager.options(name)
        policy, _, binds, st = self._policies(s, node, opts)
        if st is not None:
            return None, st
        ro = self.options(s, node, binds, opts).derive(numa_scorer=self.numa_scorer)
        with self.manager.locked():
            try:
                hints = allocator.topology_hints(
                    self.manager.allocation(name), ro, policy, self.restore_state(state, name)
                )
            except AllocationError:
                return None, Status.unschedulable(ERR_INSUFFICIENT_NUMA_NODE)
        return hints, None

    def allocate(
        self, state: CycleState, affinity: tm.NUMATopologyHint, pod: Obj, node: Obj
    ) -> Status | None:
        s = self._state(state)
        name = node_name(node)
        opts = self.manager.options(name)
        _, _, binds, st = self._policies(s, node, opts)
        if st is not None:
            return st
        ro = self.options(s, node, binds, opts, affinity)
        with self.manager.locked():
            restore = self.restore_state(state, name)
            na = self.manager.allocation(name)
            alloc, st = allocator.from_reusable(na, ro, restore, restore.matched)
            if st is not None or alloc is not None:
                return st
            return allocator.from_node(na, ro, restore)[1]

    # ---- Score --------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Status | None:
        return SKIP if self._state(state).skip else None

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        s = self._state(state)
        node = node_info.node
        if s.skip or node is None:
            return 0
        opts = self.manager.options(node_info.name)
        policy, _, binds, st = self._policies(s, node, opts)
        if st is not None or (binds and not opts.topology.valid):
            return 0
        if policy is NUMATopologyPolicy.NONE:
            return self.scorer.score(node_info.requested, node_info.allocatable, s.requests)
        affinity = tm.store(state).affinity.get(node_info.name)
        ro = self.options(s, node, binds, opts, affinity)
        with self.manager.locked():
            na = self.manager.allocation(node_info.name)
            key = self._memo_key(state, node_info.name, node, na, opts, "score", policy, affinity)
            if key is not None:
                key = (
                    *key,
                    tuple(sorted(node_info.requested.items())),
                    tuple(sorted(node_info.allocatable.items())),
                )
                hit = self.memo.get(key)
                if hit is not None:
                    return int(hit)
            alloc, st = self._try(state, pod, node, ro)
            # Filter passed it: a placement failing now only costs the node its score
            got = (
                0
                if st is not None or alloc is None
                else self._numa_score(node_info, alloc, ro, self.restore_state(state, node_info.name))
            )
            if key is not None:
                self.memo.put(key, got)
            return got

    def _numa_score(
        self, ni: NodeInfo, alloc: PodAllocation, ro: allocator.ResourceOptions, restore: NodeRestoreState
    ) -> int:
        """``calculateAllocatableAndRequested``: over the pod's NUMA nodes when it has some, with bound
        CPUs counted whole."""
        na = self.manager.allocation(ni.name)
        opts = ro.topology
        if alloc.numa:
            reusable = add_numa(restore.unmatched_used, restore.matched_allocated)
            _, used = na.available_numa(opts.numa_resources, reusable)
            allocatable: dict[str, int] = {}
            requested: dict[str, int] = {}
            totals = dict(opts.numa_resources)
            for node, _ in alloc.numa:
                requested = add(requested, used.get(node, {}))
                allocatable = add(allocatable, totals.get(node, {}))
        else:
            allocatable, requested = dict(ni.allocatable), dict(ni.requested)
        if alloc.cpus:
            _, held = na.available_cpus(
                opts.topology, opts.max_refs, opts.reserved_cpus, ro.preferred_cpus - alloc.cpus
            )
            requested["cpu"] = len(held) * 1000
        return self.scorer.score(requested, allocatable, ro.requests)

    def score_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
        s = self._state(state)
        info = state.pod_info if state.pod_info is not None else PodInfo(pod)
        out = self.scorer.score_nodes(nodes, info)
        labelled = nodes.column(_LABELLED, _labelled, bool)
        if labelled is None:
            return np.asarray([self.score(state, pod, ni) for ni in nodes], dtype=np.int64)
        look = labelled | self._among(nodes, self.manager.steering())
        if s.pod_numa_policy is not NUMATopologyPolicy.NONE:
            look[:] = True
        for i in np.flatnonzero(look).tolist():
            out[i] = self.score(state, pod, nodes.info(i))
        return out
