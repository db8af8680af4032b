"""NodeNUMAResource: CPUs and NUMA nodes for the pods that ask (Koordinator's
``pkg/scheduler/plugins/nodenumaresource``, v1.8 semantics); the contract with the node is
``docs/node-scheduler-contract.md``.

- **PreFilter** reads what the pod asks for (:mod:`.podstate`); a pod requesting nothing is skipped.
- **Filter**: a pod that binds CPUs needs the node's CPU topology (no NodeResourceTopology: the node is
  rejected, saying so); a bind policy the node forces must agree with the pod's; under a required
  ``FullPCPUs`` the CPUs must be whole cores; under a required policy without NUMA policy the CPUs are
  tried now. Under a NUMA policy (``SingleNUMANode``, ``Restricted``) the topology manager merges the
  pod's NUMA hints and the node must admit them; ``BestEffort`` is decided in Reserve.
- **Score**: the resource scorer over the node (over the NUMA nodes the pod would get, with its CPUs
  counted whole, under a NUMA policy).
- **Reserve** places the pod (:mod:`.allocator`) under the resource manager's lock and records it, so
  no later cycle gives the same CPUs; **Unreserve** gives them back. **PreBind** writes
  ``scheduling.koordinator.sh/resource-status`` (and the bind policy used into ``resource-spec`` when the
  pod named none) into the one merged PATCH.
- Preemption's what-ifs see the victims' CPUs and NUMA resources free (PreFilter extensions); the
  reservation hooks are in :mod:`.reservation`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

import numpy as np

from koord.apis import groups
from koord.apis.numa import (
    ANNOTATION_RESOURCE_SPEC,
    ANNOTATION_RESOURCE_STATUS,
    LABEL_NODE_CPU_BIND_POLICY,
    LABEL_NUMA_TOPOLOGY_POLICY,
    CPUBindPolicy,
    NodeCPUBindPolicy,
    NUMATopologyPolicy,
    dumps,
    resource_spec,
)
from koord.apis.pod import str_map
from koord.scheduler.framework import (
    SKIP,
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    NodeInfo,
    NodeSet,
    Obj,
    PodInfo,
    SchedulerHandle,
    Status,
)
from koord.scheduler.framework import topologymanager as tm
from koord.scheduler.plugins.nodenumaresource import allocator
from koord.scheduler.plugins.nodenumaresource.accumulator import AllocationError
from koord.scheduler.plugins.nodenumaresource.allocation import PodAllocation, add, add_numa
from koord.scheduler.plugins.nodenumaresource.args import NodeNUMAResourceArgs, parse_args
from koord.scheduler.plugins.nodenumaresource.manager import ResourceManager
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
    pre_filter_state,
    request_cpu_bind,
)
from koord.scheduler.plugins.nodenumaresource.reservation import ReservationHooks
from koord.scheduler.plugins.nodenumaresource.restorestate import (
    NodeRestoreState,
    PreemptibleAlloc,
)
from koord.scheduler.plugins.nodenumaresource.scoring import Scorer
from koord.scheduler.plugins.nodenumaresource.topologyoptions import (
    TopologyOptions,
    node_cpu_bind_policy,
    numa_policy_of,
)

NAME = "NodeNUMAResource"
STATE_KEY = NAME
NRT_CACHE = "noderesourcetopologies"
_LABELLED = f"{NAME}/labelled"


class _Handler:
    def __init__(self, on_add: Any, on_update: Any, on_delete: Any) -> None:
        self.on_add, self.on_update, self.on_delete = on_add, on_update, on_delete


def _labels(node: Obj) -> Mapping[str, str]:
    return str_map((node.get("metadata") or {}).get("labels") or {})


def _node_name(node: Obj) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def _labelled(ni: NodeInfo) -> bool:
    """Whether the node's labels steer binding or NUMA placement (then every pod needs a look)."""
    labels = _labels(ni.node or {})
    return bool(labels.get(LABEL_NUMA_TOPOLOGY_POLICY)) or labels.get(LABEL_NODE_CPU_BIND_POLICY, "") in (
        NodeCPUBindPolicy.FULL_PCPUS_ONLY,
        NodeCPUBindPolicy.SPREAD_BY_PCPUS,
    )


class NodeNUMAResource(ReservationHooks):
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        self.args: NodeNUMAResourceArgs = parse_args(args)
        if not callable(getattr(handle, "watch", None)) or not callable(getattr(handle, "patch_pod", None)):
            raise ValueError(
                "runs in koord-scheduler only (it watches NodeResourceTopologies and writes pods)"
            )
        self.handle = cast(SchedulerHandle, handle)
        self.scorer = Scorer(self.args.scoring_strategy)
        self.numa_scorer = Scorer(self.args.numa_scoring_strategy)
        self.manager = ResourceManager(self.args.default_numa_allocate_strategy)
        m = self.manager
        topologies = self.handle.watch(NRT_CACHE, groups.NODE_RESOURCE_TOPOLOGIES)
        topologies.add_handler(
            _Handler(m.topology_changed, lambda _o, n: m.topology_changed(n), m.topology_deleted)
        )
        self.handle.on_pods(m.pod_added, m.pod_updated, m.pod_deleted)
        nodes = self.handle.store("nodes")
        if nodes is not None:
            nodes.add_handler(_Handler(None, None, m.node_deleted))
        self.handle.register_forget_pod_handler(m.pod_deleted)

    # ---- cycle state --------------------------------------------------------------------------------

    @staticmethod
    def _state(state: CycleState) -> PreFilterState:
        got = state.get(STATE_KEY)
        return got if isinstance(got, PreFilterState) else PreFilterState(skip=True)

    def _node(self, name: str) -> Obj | None:
        ni = self.handle.node_info(name)
        return None if ni is None else ni.node

    # ---- PreFilter ----------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        info = state.pod_info if state.pod_info is not None else PodInfo(pod)
        s, st = pre_filter_state(pod, info, self.args.default_cpu_bind_policy)
        state.write(STATE_KEY, s)
        if st is not None:
            return st
        if s.skip:
            return SKIP
        tm.init_store(state)
        return None

    def add_pod(self, state: CycleState, pod: Obj, to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        """A what-if puts ``to_add`` back: what it holds is not free after all."""
        self._what_if(state, to_add, node_info, freed=False)
        return None

    def remove_pod(
        self, state: CycleState, pod: Obj, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        """A what-if removes a victim: what it holds becomes free."""
        self._what_if(state, to_remove, node_info, freed=True)
        return None

    def _what_if(self, state: CycleState, other: PodInfo, node_info: NodeInfo, *, freed: bool) -> None:
        s = self._state(state)
        if s.skip:
            return
        held = self.manager.held_by(node_info.name, other.uid)
        if held is None or (not held.cpus and not held.numa):
            return
        alloc = s.preemption.setdefault(node_info.name, PreemptibleAlloc())
        (alloc.freed if freed else alloc.taken)(held.cpus, held.numa_map())

    # ---- what a node means for the pod --------------------------------------------------------------

    def _policies(
        self, s: PreFilterState, node: Obj, opts: TopologyOptions
    ) -> tuple[NUMATopologyPolicy, str, bool, Status | None]:
        """``(NUMA policy, node bind policy, binds CPUs, why the node cannot take the pod)``."""
        labels = _labels(node)
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
        node_bind = node_cpu_bind_policy(_labels(node), opts.kubelet_policy)
        policy, required = cpu_bind_policy(s, node_bind)
        name = _node_name(node)
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
        name = _node_name(node)
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
        """Node by node where the node or the pod asks for binding or NUMA placement; a plain pod passes
        every other node without a look."""
        s = self._state(state)
        if s.skip:
            return np.ones(len(nodes), dtype=bool)
        labelled = nodes.column(_LABELLED, _labelled, bool)
        if s.request_cpu_bind or s.pod_numa_policy is not NUMATopologyPolicy.NONE or labelled is None:
            return [self.filter(state, pod, ni) for ni in nodes]
        out: list[Status | None] = [None] * len(nodes)
        for i in np.flatnonzero(labelled | self._steering(nodes)).tolist():
            out[i] = self.filter(state, pod, nodes.info(i))
        return out

    def _steering(self, nodes: NodeSet) -> np.ndarray:
        """The nodes whose report steers placement (a NUMA policy, a kubelet binding whole cores)."""
        steering = self.manager.steering()
        if not steering:
            return np.zeros(len(nodes), dtype=bool)
        return np.fromiter((ni.name in steering for ni in nodes.infos), dtype=bool, count=len(nodes))

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
        with self.manager.locked():
            states = self.manager.allocation(_node_name(node)).numa_states(opts.topology, numa_nodes)
            return tm.admit(state, pod, node, numa_nodes, policy, exclusive, states, [self])

    # ---- the topology manager's hint provider --------------------------------------------------------

    def get_pod_topology_hints(
        self, state: CycleState, pod: Obj, node: Obj
    ) -> tuple[tm.Hints | None, Status | None]:
        s = self._state(state)
        name = _node_name(node)
        opts = self.manager.options(name)
        policy, _, binds, st = self._policies(s, node, opts)
        if st is not None:
            return None, st
        ro = replace(self.options(s, node, binds, opts), numa_scorer=self.numa_scorer)
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
        name = _node_name(node)
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
            alloc, st = self._try(state, pod, node, ro)
            if st is not None or alloc is None:
                return 0  # Filter passed it: a placement failing now only costs the node its score
            return self._numa_score(node_info, alloc, ro, self.restore_state(state, node_info.name))

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
        look = labelled | self._steering(nodes)
        if s.pod_numa_policy is not NUMATopologyPolicy.NONE:
            look[:] = True
        for i in np.flatnonzero(look).tolist():
            out[i] = self.score(state, pod, nodes.info(i))
        return out

    # ---- Reserve ------------------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        try:
            return self._reserve(state, pod, node_name)
        finally:
            self.clear_restore_state(state)

    def _reserve(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        s = self._state(state)
        if s.skip:
            return None
        node = self._node(node_name)
        if node is None:
            return Status.error(f"getting node {node_name!r} from Snapshot: not found")
        meta = pod.get("metadata") or {}
        with self.manager.locked():
            if s.allocation is None:
                opts = self.manager.options(node_name)
                policy, _, binds, st = self._policies(s, node, opts)
                if st is not None:
                    return st
                if policy is NUMATopologyPolicy.BEST_EFFORT:
                    st = self.filter_by_numa(state, pod, node, policy, s.exclusive_for(), opts)
                    if st is not None:
                        return st
                if not binds and policy is NUMATopologyPolicy.NONE:
                    return None
                if binds and not opts.topology.valid:
                    return Status.error(ERR_INVALID_CPU_TOPOLOGY)
                affinity = tm.store(state).affinity.get(node_name)
                ro = self.options(s, node, binds, opts, affinity)
                alloc, st = self._try(state, pod, node, ro)
                if st is not None:
                    return st
                if alloc is not None:
                    alloc = replace(
                        alloc,
                        uid=PodInfo.uid_of(pod),
                        namespace=str(meta.get("namespace") or ""),
                        name=str(meta.get("name") or ""),
                    )
                s.allocation = alloc
            if s.allocation is not None:
                self.manager.update(node_name, s.allocation)
        return None

    def unreserve(self, state: CycleState, pod: Obj, node_name: str) -> None:
        s = self._state(state)
        if s.allocation is not None:
            self.manager.release(node_name, s.allocation.uid)

    # ---- PreBind ------------------------------------------------------------------------------------

    def pre_bind(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        patch = self.placement_patch(state, pod, node_name)
        if patch:
            self.handle.patch_pod(state, {"metadata": {"annotations": patch}})
        return None

    def placement_patch(self, state: CycleState, obj: Obj, node_name: str) -> dict[str, str]:
        """The annotations that say the placement: ``resource-status``, and ``resource-spec`` with the
        bind policy used when the object named none (``appendResourceSpecIfMissed``)."""
        s = self._state(state)
        if s.skip or s.allocation is None:
            return {}
        out = {ANNOTATION_RESOURCE_STATUS: s.allocation.resource_status().annotation()}
        node = self._node(node_name)
        if node is None:
            return out
        opts = self.manager.options(node_name)
        node_bind = node_cpu_bind_policy(_labels(node), opts.kubelet_policy)
        binds, _ = request_cpu_bind(s, node_bind)
        if binds:
            policy, required = cpu_bind_policy(s, node_bind)
            spec = resource_spec(str_map((obj.get("metadata") or {}).get("annotations") or {}))
            before = spec
            if required and spec.required_cpu_bind_policy in ("", CPUBindPolicy.DEFAULT):
                spec = replace(spec, required_cpu_bind_policy=policy)
            if spec.preferred_cpu_bind_policy == CPUBindPolicy.DEFAULT:
                spec = replace(spec, preferred_cpu_bind_policy=policy)
            if not spec.required_cpu_bind_policy and not spec.preferred_cpu_bind_policy and policy:
                spec = replace(spec, preferred_cpu_bind_policy=policy)
            if spec != before:
                out[ANNOTATION_RESOURCE_SPEC] = dumps(spec.to_json())
        return out

    # ---- requeueing and debugging -------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ClusterEvent("Pod", Action.DELETE)),
            ClusterEventWithHint(ClusterEvent(groups.NODE_RESOURCE_TOPOLOGIES.kind, Action.ALL)),
            ClusterEventWithHint(ClusterEvent("Node", Action.ADD | Action.UPDATE_NODE_LABEL)),
        )

    def debug_node(self, node_name: str) -> Any:
        return self.manager.describe(node_name)
