"""NodeNUMAResource's Filter (Koordinator's ``plugin.go`` ``Filter``, ``topology_hint.go``) and its part
as the topology manager's hint provider; Score builds on it (:mod:`.placementscore`).

A pod is looked at node by node only where something calls for it: a node whose labels or report steer
binding or NUMA placement, a pod with a NUMA policy or a required bind policy; elsewhere a pod binding
CPUs needs the node's topology and a pod binding none passes. Where every node is looked at, each kind of
node (same report, holding and steering labels: :meth:`Placement._kind`) is decided once per cycle, and
NUMA admissions and scores are memoised across cycles by what they depend on (the node's report and
holding, the pod's shape), so a deployment's replicas over identical nodes compute each once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from koord.scheduler.framework import CodedVerdicts, CycleState, NodeInfo, NodeSet, Obj, Status
from koord.scheduler.framework import topologymanager as tm
from koord.scheduler.framework.snapshot import Snapshot
from koord.scheduler.plugins.nodenumaresource import allocator
from koord.scheduler.plugins.nodenumaresource.accumulator import AllocationError
from koord.scheduler.plugins.nodenumaresource.affinities import KindAffinities, shared_of
from koord.scheduler.plugins.nodenumaresource.allocation import NodeAllocation, PodAllocation
from koord.scheduler.plugins.nodenumaresource.kinds import KindCodes, one_of_each
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
from koord.scheduler.plugins.nodenumaresource.restorestate import EMPTY_RESTORE
from koord.scheduler.plugins.nodenumaresource.scoring import Scorer
from koord.scheduler.plugins.nodenumaresource.topologyoptions import (
    TopologyOptions,
    labels_of,
    node_cpu_bind_policy,
    node_name,
    numa_policy_of,
    steers_by_labels,
)
from koordshared.apis.extension.numa import (
    LABEL_NODE_CPU_BIND_POLICY,
    CPUBindPolicy,
    NodeCPUBindPolicy,
    NUMATopologyPolicy,
)

STATE_KEY = "NodeNUMAResource"
LABELLED_COLUMN = "NodeNUMAResource/labelled"


def state_of(state: CycleState) -> PreFilterState:
    got = state.get(STATE_KEY)
    return got if isinstance(got, PreFilterState) else PreFilterState(skip=True)


class Placement(ReservationHooks):
    """Filter and the hint provider, mixed into the plugin (which sets these attributes)."""

    manager: ResourceManager
    scorer: Scorer
    numa_scorer: Scorer
    memo: Memo
    kind_codes: KindCodes

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
        self,
        state: CycleState,
        pod: Obj,
        node: Obj,
        ro: allocator.ResourceOptions,
        policy: NUMATopologyPolicy,
        base: tuple[Any, ...] | None,
    ) -> tuple[PodAllocation | None, Status | None]:
        """A placement from the pod's reservation on the node, else from the node's free resources;
        remembered under the node's :meth:`_memo_key` ``base`` when there is one (Score, then Reserve,
        ask it of alike nodes). Call with the manager's lock held."""
        name = node_name(node)
        restore = self.restore_state(state, name)
        na = self.manager.allocation(name)
        key = None if base is None else ("place", policy, ro.hint, *base)
        if key is not None:
            hit = self.memo.get(key)
            if hit is not None:
                return hit  # type: ignore[no-any-return]
        got = self.allocate_with_nominated(state, pod, name, na, ro, restore)
        if got[0] is None and got[1] is None:
            got = allocator.from_node(na, ro, restore)
        if key is not None:
            self.memo.put(key, got)
        return got

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
        if s.pod_numa_policy is not NUMATopologyPolicy.NONE or s.required_cpu_bind_policy:
            return self._filter_alike(state, pod, nodes)
        labelled = nodes.column(LABELLED_COLUMN, steers_by_labels, bool)
        if labelled is None:
            return self._filter_alike(state, pod, nodes)
        look = labelled | self._among(nodes, self.manager.steering())
        out = (
            self._among(nodes, self.manager.valid())
            if s.request_cpu_bind
            else np.ones(len(nodes), dtype=bool)
        )
        for i in np.flatnonzero(look).tolist():
            out[i] = self.filter(state, pod, nodes.info(i)) is None
        return out

    def _filter_alike(self, state: CycleState, pod: Obj, nodes: NodeSet) -> Sequence[Status | None]:
        """``filter`` on every node, once per kind of node (:meth:`_kinds`): the others of a kind get the
        answer of the one decided, and its NUMA affinity through the store's shared affinities (one
        entry a kind). Answered as codes into the distinct verdicts, so the cycle finds each verdict's
        nodes with one comparison."""
        codes = self.kind_codes.codes(nodes)
        if codes is None or nodes.rows is None or not isinstance(nodes.snapshot, Snapshot):
            return self._filter_alike_one_by_one(state, pod, nodes)
        store = tm.store(state)
        shared = shared_of(store, nodes.snapshot)
        groups = self._grouped(state, nodes, codes)
        verdicts: dict[Status | None, int] = {None: 0}
        out = np.zeros(len(nodes), dtype=np.int64)
        with self.manager.locked():
            kinds = np.flatnonzero(groups > 0)
            _, one, inverse = one_of_each(groups[kinds])
            of_kind = np.zeros(len(one), dtype=np.int64)
            hint_of_kind = np.full(len(one), -1, dtype=np.int64)
            hints: list[tm.NUMATopologyHint] = []
            for k, i in enumerate(kinds[one].tolist()):
                ni = nodes.info(i)
                of_kind[k] = verdicts.setdefault(self.filter(state, pod, ni), len(verdicts))
                best = store.get_affinity(ni.name)
                if best is not None:
                    hint_of_kind[k] = len(hints)
                    hints.append(best)
            for i in np.flatnonzero(groups < 0).tolist():
                out[i] = verdicts.setdefault(self.filter(state, pod, nodes.info(i)), len(verdicts))
            out[kinds] = of_kind[inverse]
            if hints:
                if shared is not None:
                    shared.choose(nodes.rows[kinds], hint_of_kind[inverse], hints)
                else:
                    which = hint_of_kind[inverse]
                    at = np.flatnonzero(which >= 0)
                    for name, k in zip(nodes.names_at(kinds[at]), which[at].tolist(), strict=True):
                        store.set_affinity(name, hints[k])
        return CodedVerdicts(out, list(verdicts))

    def _grouped(
        self, state: CycleState, nodes: NodeSet, codes: np.ndarray, *, chosen: bool = False
    ) -> np.ndarray:
        """``codes`` with -1 for the nodes to look at alone (as :meth:`_kinds`' ``None``)."""
        preemption = self._state(state).preemption
        store = tm.store(state)
        affinity = {} if chosen else store.affinity
        restores = self.restore_states(state)
        out = codes.copy()
        if (preemption or affinity or restores) and nodes.snapshot is not None and nodes.rows is not None:
            index = nodes.snapshot.index
            rows = [index[n] for n in (*preemption, *affinity, *restores) if n in index]
            out[np.isin(nodes.rows, rows)] = -1
        shared = store.shared
        if not chosen and isinstance(shared, KindAffinities) and shared.hints and nodes.rows is not None:
            out[shared.indices(nodes.rows) >= 0] = -1
        return out

    def _filter_alike_one_by_one(self, state: CycleState, pod: Obj, nodes: NodeSet) -> list[Status | None]:
        store = tm.store(state)
        seen: dict[tuple[Any, ...], tuple[Status | None, tm.NUMATopologyHint | None]] = {}
        out: list[Status | None] = []
        with self.manager.locked():
            for ni, key in zip(nodes, self._kinds(state, nodes), strict=True):
                hit = seen.get(key) if key is not None else None
                if hit is None:
                    st = self.filter(state, pod, ni)
                    if key is not None:
                        seen[key] = (st, store.get_affinity(ni.name))
                else:
                    st, best = hit
                    if best is not None:
                        store.set_affinity(ni.name, best)
                out.append(st)
        return out

    def _kinds(
        self, state: CycleState, nodes: Sequence[NodeInfo], *, chosen: bool = False
    ) -> list[tuple[Any, ...] | None]:
        """What each node's answer depends on beside the pod (its report, its holding, its steering
        labels: :meth:`.manager.ResourceManager.kind`); ``None`` for a node to look at alone (a
        reservation or a what-if on it, or, unless ``chosen`` (scoring), its NUMA affinity already
        chosen). The cycle state is read once for all the nodes."""
        preemption = self._state(state).preemption
        store = None if chosen else tm.store(state)
        restores = self.restore_states(state)
        alone = [
            ni.node is None
            or ni.name in preemption
            or ni.name in restores
            or (store is not None and store.get_affinity(ni.name) is not None)
            for ni in nodes
        ]
        kinds = self.manager.kinds(
            [
                (ni.name, node)
                for ni, skip in zip(nodes, alone, strict=True)
                if not skip and (node := ni.node) is not None
            ]
        )
        it = iter(kinds)
        return [None if skip else next(it) for skip in alone]

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
            chosen = store.get_affinity(name) is not None
            base = None if chosen else self._memo_key(state, name, node, na, opts)
            key = None if base is None else ("admit", policy, exclusive, *base)
            if key is not None:
                hit = self.memo.get(key)
                if hit is not None:
                    st, best = hit
                    if best is not None:
                        store.set_affinity(name, best)
                    return st  # type: ignore[no-any-return]
            states = na.numa_states(opts.topology, numa_nodes)
            st = tm.admit(state, pod, node, numa_nodes, policy, exclusive, states, [self])
            if key is not None:
                self.memo.put(key, (st, store.get_affinity(name)))
            return st

    def _memo_key(
        self, state: CycleState, name: str, node: Obj, na: NodeAllocation, opts: TopologyOptions
    ) -> tuple[Any, ...] | None:
        """What a NUMA decision on this node depends on, so that nodes and cycles alike share it (a
        deployment's replicas over identical nodes; each decision prepends what it is); ``None`` when
        reservations or a preemption what-if are in play."""
        s = self._state(state)
        if name in s.preemption or self.restore_state(state, name) is not EMPTY_RESTORE:
            return None
        labels = labels_of(node)
        steer = (labels.get(LABEL_NODE_CPU_BIND_POLICY, ""), self.manager.strategy(node))
        return (opts.fingerprint, na.fingerprint(), s.memo_key(), steer)

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
