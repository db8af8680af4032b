"""NodeNUMAResource: CPUs and NUMA nodes for the pods that ask (Koordinator's
``pkg/scheduler/plugins/nodenumaresource``, v1.8 semantics); the contract with the node is
``docs/node-scheduler-contract.md``. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from koord.scheduler.framework import (
    SKIP,
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    NodeInfo,
    Obj,
    PodInfo,
    ReservationInfo,
    SchedulerHandle,
    Status,
)
from koord.scheduler.framework import topologymanager as tm
from koord.scheduler.framework.extension import ReservationHooks as ProfileHooks
from koord.scheduler.plugins.nodenumaresource import allocator
from koord.scheduler.plugins.nodenumaresource.args import NodeNUMAResourceArgs, parse_args
from koord.scheduler.plugins.nodenumaresource.kinds import KindCodes
from koord.scheduler.plugins.nodenumaresource.manager import ResourceManager
from koord.scheduler.plugins.nodenumaresource.memo import Memo
from koord.scheduler.plugins.nodenumaresource.placement import STATE_KEY
from koord.scheduler.plugins.nodenumaresource.placementscore import ResourceCodes, ScoredPlacement
from koord.scheduler.plugins.nodenumaresource.podstate import (
    ERR_INVALID_CPU_TOPOLOGY,
    cpu_bind_policy,
    pre_filter_state,
    request_cpu_bind,
)
from koord.scheduler.plugins.nodenumaresource.reservation import reservation_changed, reservation_deleted
from koord.scheduler.plugins.nodenumaresource.restorestate import PreemptibleAlloc
from koord.scheduler.plugins.nodenumaresource.scoring import Scorer
from koord.scheduler.plugins.nodenumaresource.topologyoptions import labels_of, node_cpu_bind_policy
from koordshared.apis.extension.numa import (
    ANNOTATION_RESOURCE_SPEC,
    ANNOTATION_RESOURCE_STATUS,
    CPUBindPolicy,
    NUMATopologyPolicy,
    dumps,
    resource_spec,
)
from koordshared.apis.meta import groups

NAME = STATE_KEY
NRT_CACHE = "noderesourcetopologies"
RESERVATION_CACHE = "reservations"
"""The Reservation plugin's cache of Reservations (read when that plugin is in the profile)."""
ERR_RESERVATION_NUMA_SCOPE = "reservation NUMA scope is incompatible with the best topology hint"


@functools.lru_cache(maxsize=256)
def _spec_with_policy(text: str | None, policy: str, required: bool) -> str | None:
    """The ``resource-spec`` ``text`` with the bind policy used where it names none; ``None`` when it
    stays as it is. Remembered: the pods of a workload carry one text."""
    spec = resource_spec({ANNOTATION_RESOURCE_SPEC: text} if text is not None else {})
    before = spec
    if required and spec.required_cpu_bind_policy in ("", CPUBindPolicy.DEFAULT):
        spec = replace(spec, required_cpu_bind_policy=policy)
    if spec.preferred_cpu_bind_policy == CPUBindPolicy.DEFAULT:
        spec = replace(spec, preferred_cpu_bind_policy=policy)
    if not spec.required_cpu_bind_policy and not spec.preferred_cpu_bind_policy and policy:
        spec = replace(spec, preferred_cpu_bind_policy=policy)
    return None if spec == before else dumps(spec.to_json())


class _Handler:
    def __init__(self, on_add: Any, on_update: Any, on_delete: Any) -> None:
        self.on_add, self.on_update, self.on_delete = on_add, on_update, on_delete


class NodeNUMAResource(ScoredPlacement):
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
        self.memo = Memo()
        self.kind_codes = KindCodes(self.manager)
        self.resource_codes = ResourceCodes()
        self._reservations_watched = False
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
                affinity = tm.store(state).get_affinity(node_name)
                ro = self.options(s, node, binds, opts, affinity)
                base = self._memo_key(state, node_name, node, self.manager.allocation(node_name), opts)
                alloc, st = self._try(state, pod, node, ro, policy, base)
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

    def pre_bind_reservation(
        self, state: CycleState, reservation: ReservationInfo, node_name: str
    ) -> Status | None:
        """A reserve pod's placement goes onto its Reservation (the handle sends the patch there)."""
        patch = self.placement_patch(state, reservation.pod, node_name)
        if patch:
            self.handle.patch_pod(state, {"metadata": {"annotations": patch}})
        return None

    def placement_patch(self, state: CycleState, obj: Obj, node_name: str) -> dict[str, str]:
        """The annotations that say the placement: ``resource-status``, and ``resource-spec`` with the
        bind policy used when the object named none (``appendResourceSpecIfMissed``)."""
        s = self._state(state)
        if s.skip or s.allocation is None:
            return {}
        out = {ANNOTATION_RESOURCE_STATUS: s.allocation.status_annotation()}
        node = self._node(node_name)
        if node is None:
            return out
        opts = self.manager.options(node_name)
        node_bind = node_cpu_bind_policy(labels_of(node), opts.kubelet_policy)
        binds, _ = request_cpu_bind(s, node_bind)
        if binds:
            policy, required = cpu_bind_policy(s, node_bind)
            text = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_RESOURCE_SPEC)
            spec = _spec_with_policy(None if text is None else str(text), policy, required)
            if spec is not None:
                out[ANNOTATION_RESOURCE_SPEC] = spec
        return out

    # ---- reservations --------------------------------------------------------------------------------

    def use_reservation_hooks(self, hooks: ProfileHooks) -> None:
        """With the Reservation plugin in the profile, its Available reservations are counted on their
        nodes as their reserve pods (the placement their ``resource-status`` says)."""
        super().use_reservation_hooks(hooks)
        store = self.handle.store(RESERVATION_CACHE) if hooks.nominator is not None else None
        if store is None or self._reservations_watched:
            return
        self._reservations_watched = True
        m = self.manager
        store.add_handler(
            _Handler(
                lambda r: reservation_changed(m, None, r),
                lambda old, new: reservation_changed(m, old, new),
                lambda r: reservation_deleted(m, r),
            )
        )

    def filter_nominate_reservation(
        self, state: CycleState, pod: Obj, reservation: ReservationInfo, node_name: str
    ) -> Status | None:
        """``FilterNominateReservation``: the pod's CPUs and NUMA resources fit in what ``reservation``
        holds for it on the node (a reservation holding none passes)."""
        s = self._state(state)
        if s.skip:
            return None
        node = self._node(node_name)
        if node is None:
            return Status.error(f"getting node {node_name!r} from Snapshot: not found")
        opts = self.manager.options(node_name)
        policy, _, binds, st = self._policies(s, node, opts)
        if st is not None:
            return st
        if not binds and policy is NUMATopologyPolicy.NONE:
            return None
        if binds and not opts.topology.valid:
            return Status.unresolvable(ERR_INVALID_CPU_TOPOLOGY)
        restore = self.restore_state(state, node_name)
        held = restore.matched.get(reservation.uid)
        if held is None:
            return None
        ro = self.options(s, node, binds, opts, tm.store(state).get_affinity(node_name))
        with self.manager.locked():
            na = self.manager.allocation(node_name)
            result, st = allocator.from_reusable(na, ro, restore, {held.uid: held})
        if st is not None:
            return st
        return Status.unschedulable(ERR_RESERVATION_NUMA_SCOPE) if result is None else None

    # ---- requeueing and debugging -------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ClusterEvent("Pod", Action.DELETE)),
            ClusterEventWithHint(ClusterEvent(groups.NODE_RESOURCE_TOPOLOGIES.kind, Action.ALL)),
            ClusterEventWithHint(ClusterEvent("Node", Action.ADD | Action.UPDATE_NODE_LABEL)),
        )

    def debug_node(self, node_name: str) -> Any:
        return self.manager.describe(node_name)
