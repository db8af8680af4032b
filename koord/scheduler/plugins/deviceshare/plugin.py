"""DeviceShare: scheduling pods onto nodes' GPUs, RDMA NICs and FPGAs, described by the nodes' ``Device``
objects (Koordinator's ``pkg/scheduler/plugins/deviceshare``, v1.8 semantics). Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from koord.scheduler.framework import (
    SKIP,
    CodedVerdicts,
    CycleState,
    NodeInfo,
    NodeSet,
    Obj,
    PodInfo,
    SchedulerHandle,
    Status,
)
from koord.scheduler.framework.events import POD, Action, ClusterEvent, ClusterEventWithHint
from koord.scheduler.framework.extension import ReservationHooks as ProfileHooks
from koord.scheduler.framework.hinter import hint_state
from koord.scheduler.framework.interface import StoreHandler
from koord.scheduler.plugins.deviceshare import batch, scoring
from koord.scheduler.plugins.deviceshare import resources as rs
from koord.scheduler.plugins.deviceshare.alike import AlikeNodes
from koord.scheduler.plugins.deviceshare.allocator import Allocator, filled
from koord.scheduler.plugins.deviceshare.args import MOST, DeviceShareArgs, parse_args
from koord.scheduler.plugins.deviceshare.cache import DeviceCache
from koord.scheduler.plugins.deviceshare.devicepick import AllocationFailed
from koord.scheduler.plugins.deviceshare.hooks import ReservationHooks
from koord.scheduler.plugins.deviceshare.nodedevice import NodeDevice, memo_key
from koord.scheduler.plugins.deviceshare.reservation import (
    RESTORE_KEY,
    NodeRestore,
    ignoring_reservations,
    node_restore,
    score_with,
    try_from_reusable,
)
from koord.scheduler.plugins.deviceshare.resources import ByType
from koord.scheduler.plugins.deviceshare.scoring import Scorer
from koord.scheduler.plugins.deviceshare.state import (
    STATE_KEY,
    PodDeviceState,
    PodRejected,
    prepare_pod,
)
from koord.scheduler.plugins.deviceshare.templates import Templates
from koordshared.apis.core.pod import pod_key
from koordshared.apis.extension.deviceshare import (
    DeviceAllocations,
)
from koordshared.apis.meta import groups
from koordshared.apis.scheduling import device as dv

NAME = "DeviceShare"
_EVENTS = (
    ClusterEventWithHint(ClusterEvent(POD, Action.DELETE)),
    ClusterEventWithHint(ClusterEvent(groups.DEVICES.kind, Action.ALL)),
)


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dv.labels_of(obj) if obj is not None else {}


def _reserved_key(filter_key: tuple[str, str, int, int]) -> tuple[str, str, int, int]:
    """Where Filter keeps the allocation behind a verdict it remembers, for Reserve on the same node."""
    return ("allocation", *filter_key[1:])


class DeviceShare(ReservationHooks):
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        self.args: DeviceShareArgs = parse_args(args)
        if not hasattr(handle, "watch") or not hasattr(handle, "patch_pod"):
            raise ValueError("runs in koord-scheduler only (it watches Device objects and patches pods)")
        self.handle = cast(SchedulerHandle, handle)
        self._reservation_hooks: ProfileHooks | None = None
        self.scorer = Scorer(self.args.scoring_type == MOST, dict(self.args.scoring_resources))
        self.cache = DeviceCache()
        self.answers = batch.Answers(self.cache)
        self.alike = AlikeNodes()
        self._device_ids = {}
        self.templates = Templates()
        self.devices = self.handle.watch("devices", groups.DEVICES)
        self.devices.add_handler(
            StoreHandler(self.cache.device_changed, self._device_updated, self._device_deleted)
        )
        self.handle.on_pods(self.cache.pod_added, self.cache.pod_updated, self.cache.pod_deleted)
        reservations = self.handle.watch("reservations", groups.RESERVATIONS)
        reservations.add_handler(
            StoreHandler(
                lambda r: self.cache.reservation_changed(None, r),
                self._reservation_updated,
                self.cache.reservation_deleted,
            )
        )
        nodes = self.handle.store("nodes")
        if nodes is not None:
            nodes.add_handler(StoreHandler(on_delete=self.cache.node_deleted))
        self.handle.register_forget_pod_handler(self.cache.forget)
        t = self.args.templates
        if t.namespace and t.name:
            config_maps = self.handle.watch(
                f"configmaps/{t.namespace}/{t.name}",
                groups.CONFIG_MAPS,
                namespace=t.namespace,
                field_selector=groups.named(t.name),
            )
            config_maps.add_handler(
                StoreHandler(
                    self.templates.config_map_changed,
                    lambda _old, new: self.templates.config_map_changed(new),
                    self.templates.config_map_deleted,
                )
            )

    def _device_updated(self, old: Obj, new: Obj) -> None:
        if old is not new:
            self.cache.device_changed(new)

    def _device_deleted(self, device: Obj) -> None:
        self._device_ids.pop(str((device.get("metadata") or {}).get("name") or ""), None)
        self.cache.device_deleted(device)

    def _reservation_updated(self, old: Obj, new: Obj) -> None:
        if old is not new:
            self.cache.reservation_changed(old, new)

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return _EVENTS

    def debug_node(self, node_name: str) -> Any:
        nd = self.cache.get(node_name)
        return None if nd is None else nd.summary()

    # ---- PreFilter --------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        info = state.pod_info if state.pod_info is not None else PodInfo(pod)
        try:
            ps = prepare_pod(
                pod, info.requests, self.templates.current(), self.args.templates.matched_resources
            )
        except PodRejected as rejected:
            return Status.unresolvable(str(rejected))
        hint = hint_state(state)
        if hint is None or NAME not in hint.extensions:
            ps.designated, ps.designated_vfs = None, {}
        state.write(STATE_KEY, ps)
        return SKIP if ps.skip else None

    def add_pod(self, state: CycleState, pod: Obj, to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        """Preemption's what-if puts a pod back: its devices are no longer free for this pod."""
        return self._what_if(state, to_add, node_info, added=True)

    def remove_pod(
        self, state: CycleState, pod: Obj, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        """Preemption's what-if removes a pod: its devices count as free for this pod."""
        return self._what_if(state, to_remove, node_info, added=False)

    def _what_if(self, state: CycleState, other: PodInfo, node_info: NodeInfo, added: bool) -> Status | None:
        ps = self._state(state)
        nd = self.cache.get(node_info.name)
        if ps.skip or nd is None:
            return None
        with nd.lock:
            held = nd.held_by(other.key)
        if not held:
            return None
        current = ps.preemptible.get(node_info.name, {})
        if added:
            ps.preemptible[node_info.name] = rs.subtract_allocated(current, held, False)
        else:
            ps.preemptible[node_info.name] = rs.append_allocated(current, held)
        return None

    # ---- Filter and Score -------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        ps = self._state(state)
        if ps.skip:
            return None
        node = node_info.node
        if node is None:
            return Status.error("node not found")
        rejected = self._gpu_share_refused(ps, pod, node)
        if rejected is not None:
            return rejected
        if ps.designated is not None:
            if ps.result is None:
                try:
                    self._allocate(state, ps, pod, node)
                except AllocationFailed as failed:
                    return failed.status
                ps.result = None
            return None
        nd = self.cache.get(node_info.name)
        if nd is None:
            return None
        restore = node_restore(state, node_info.name)
        basic = rs.append_allocated(None, restore.unmatched_used, ps.preemptible.get(node_info.name))
        key = self._memo_key("filter", ps, node, restore, basic)
        with nd.lock:
            alike: Hashable = None
            if key is not None:
                found = nd.memo.get(key)
                if found is not None and found[0] is node:
                    remembered: Status | None = found[1]
                    return remembered
                alike = (key[:3], self.alike.key(nd, node))
                shared = self.alike.get(alike)
                if shared is not None:
                    self._remember_filter(nd, key, node, *shared)
                    verdict_shared: Status | None = shared[0]
                    return verdict_shared
            # Scored as Reserve scores (the scorer picks among the devices that fit, it never decides
            # whether they do), so Reserve on this node as it is takes the allocation worked out here.
            allocator = Allocator(ps, nd, node, self.scorer)
            allocation: DeviceAllocations | None = None
            try:
                got = try_from_reusable(
                    allocator,
                    ps,
                    restore,
                    restore.matched,
                    node_info.name,
                    basic,
                    ps.reservation_ignored,
                    ps.reservation_required,
                )
                if not got:
                    allocation = allocator.allocate(
                        None, None, None, rs.append_allocated(basic, restore.matched_allocatable)
                    )
                verdict = None
            except AllocationFailed as failed:
                verdict = failed.status
            if key is not None:
                self._remember_filter(nd, key, node, verdict, allocation)
                self.alike.put(alike, (verdict, allocation))
        return verdict

    @staticmethod
    def _remember_filter(
        nd: NodeDevice,
        key: tuple[str, str, int, int],
        node: Obj,
        verdict: Status | None,
        allocation: DeviceAllocations | None,
    ) -> None:
        nd.remember(key, node, verdict)
        if allocation is not None:
            nd.remember(_reserved_key(key), node, allocation)

    def filter_nodes(
        self, state: CycleState, pod: Obj, nodes: NodeSet
    ) -> CodedVerdicts | list[Status | None]:
        ps = self._state(state)
        if ps.skip:
            return [None] * len(nodes)
        gen = self.templates.generation
        got = self.answers.get(
            "filter",
            ps,
            gen,
            state,
            pod,
            nodes,
            self.filter,
            batch.verdict_code,
            self._number,
            self._shared("filter", ps),
        )
        return got if isinstance(got, list) else CodedVerdicts(*got)

    def _number(self, info: NodeInfo) -> int:
        """What the node is as an allocation reads it (:meth:`.AlikeNodes.key`; 0: no devices)."""
        nd = self.cache.get(info.name)
        if nd is None or info.node is None:
            return 0
        with nd.lock:
            return self.alike.key(nd, info.node)

    def _shared(self, kind: str, ps: PodDeviceState) -> Callable[[int], tuple[Any] | None]:
        """The batch's look-up of the answer of a node alike, by its number (as ``filter``/``score``
        would find it, in a batch where nothing but the shape and the node decides), as a 1-tuple."""
        shape = (kind, ps.signature, self.templates.generation)

        def shared(number: int) -> tuple[Any] | None:
            found = self.alike.get((shape, number))
            if found is None:
                return None
            return (found[0],) if kind == "filter" else (found,)

        return shared

    def _memo_key(
        self, kind: str, ps: PodDeviceState, node: Obj, restore: NodeRestore, basic: ByType
    ) -> tuple[str, str, int, int] | None:
        """The key of a Filter verdict or a score on a node for pods of this shape, when nothing but the
        shape, the node's devices and the node object decide it (no reservation, nothing preemption
        frees): pods of the same shape meet the same unchanged nodes cycle after cycle. ``None``: work it
        out."""
        if ps.designated is not None or any(basic.values()) or restore.matched or restore.unmatched:
            return None
        return memo_key(kind, ps.signature, self.templates.generation, node)

    def _gpu_share_refused(self, ps: PodDeviceState, pod: Obj, node: Obj) -> Status | None:
        if ps.gpu is None or not ps.gpu.shared:
            return None
        labels = _labels(node)
        provider = ps.isolation_provider
        if provider and provider != labels.get(dv.LABEL_GPU_ISOLATION_PROVIDER):
            # Koordinator answers an error here, which fails the whole cycle; this node alone is unfit.
            return Status.unresolvable("GPUIsolationProviderHAMICore not found on the node")
        vendor, model = str(labels.get(dv.LABEL_GPU_VENDOR, "")), str(labels.get(dv.LABEL_GPU_MODEL, ""))
        if model in self.args.unsupported_models.get(vendor, frozenset()):
            return Status.unresolvable(f'model "{model}" of vendor "{vendor}" does not support GPU Share')
        return None

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Status | None:
        return SKIP if self._state(state).skip else None

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        ps = self._state(state)
        nd = self.cache.get(node_info.name)
        if ps.skip or nd is None:
            return 0
        restore = node_restore(state, node_info.name)
        basic = rs.append_allocated(None, restore.unmatched_used, ps.preemptible.get(node_info.name))
        key = self._memo_key("score", ps, node_info.node or {}, restore, basic)
        # Only a matched reservation can be nominated (and then nothing is remembered).
        uid = self._nominated(state, pod, node_info.name) if restore.matched else ""
        nominated = [r for r in restore.matched if uid and r.reservation.uid == uid]
        with nd.lock:
            found = nd.memo.get(key) if key is not None else None
            if found is not None and found[0] is node_info.node:
                remembered: int = found[1]
                return remembered
            alike: Hashable = None
            if key is not None and node_info.node is not None:
                alike = (key[:3], self.alike.key(nd, node_info.node))
                shared: int | None = self.alike.get(alike)
                if shared is not None:
                    nd.remember(key, node_info.node, shared)
                    return shared
            allocator = Allocator(ps, nd, node_info.node, self.scorer)
            if nominated:  # the node's score with the pod in its nominated reservation, when it fits there
                try:
                    return score_with(allocator, ps, restore, nominated[0], node_info.name, basic)
                except AllocationFailed:
                    pass
            try:
                score = allocator.score(None, rs.append_allocated(basic, restore.matched_allocatable))
            except AllocationFailed as failed:
                raise RuntimeError(failed.status.message) from failed
            if key is not None:
                nd.remember(key, node_info.node, score)
                if alike is not None:
                    self.alike.put(alike, score)
            return score

    def score_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray | list[int]:
        ps = self._state(state)
        if ps.skip:
            return [0] * len(nodes)
        gen = self.templates.generation
        got = self.answers.get(
            "score",
            ps,
            gen,
            state,
            pod,
            nodes,
            self.score,
            batch.score_code,
            self._number,
            self._shared("score", ps),
        )
        return got if isinstance(got, list) else got[0]

    def normalize_scores(self, state: CycleState, pod: Obj, scores: np.ndarray) -> np.ndarray:
        return scoring.normalize(scores)

    # ---- Reserve, Unreserve, PreBind --------------------------------------------------------------

    def _allocate(
        self, state: CycleState, ps: PodDeviceState, pod: Obj, node: Obj, reserving: bool = False
    ) -> None:
        """``allocate``: the pod's allocation on ``node`` into ``ps.result`` (nothing on a node without a
        Device); :class:`AllocationFailed` when it does not fit."""
        name = str((node.get("metadata") or {}).get("name") or "")
        nd = self.cache.get(name)
        if nd is None:
            return
        restore = node_restore(state, name)
        basic = rs.append_allocated(None, restore.unmatched_used, ps.preemptible.get(name))
        allocator = Allocator(ps, nd, node, self.scorer, reserving=reserving)
        key = self._memo_key("filter", ps, node, restore, basic)
        with nd.lock:
            if key is not None and not ps.reservation_ignored and not allocator.reserving_matters():
                found = nd.memo.get(_reserved_key(key))
                if found is not None and found[0] is node:
                    ps.result = filled(found[1], nd)
                    return
                shared = self.alike.get((key[:3], self.alike.key(nd, node)))
                if shared is not None and shared[1] is not None:
                    ps.result = filled(shared[1], nd)
                    return
            if ps.reservation_ignored:
                result: DeviceAllocations | None = ignoring_reservations(
                    allocator, ps, restore, restore.matched, name, basic
                )
            else:
                nominated = [
                    r for r in restore.matched if r.reservation.uid == self._nominated(state, pod, name)
                ]
                result = try_from_reusable(allocator, ps, restore, nominated, name, basic, False, False)
            if not result:
                required = None
                if ps.designated:
                    designated = filled(ps.designated, nd)
                    required = {
                        t: {a.minor: dict(a.resources) for a in allocs} for t, allocs in designated.items()
                    }
                result = allocator.allocate(
                    None, None, required, rs.append_allocated(basic, restore.matched_allocatable)
                )
            ps.result = filled(result, nd)

    def reserve(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        try:
            return self._reserve(state, pod, node_name)
        finally:
            # The restore state holds every node's reservations: not needed past this point.
            state.delete(RESTORE_KEY)

    def _reserve(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        ps = self._state(state)
        if ps.skip:
            return None
        if ps.result is None:
            info = self.handle.node_info(node_name)
            if info is None or info.node is None:
                return Status.error(f"getting nil node {node_name!r} from Snapshot")
            try:
                self._allocate(state, ps, pod, info.node, reserving=True)
            except AllocationFailed as failed:
                return failed.status
        if ps.result is None or self.cache.get(node_name) is None:
            return None
        self.cache.count(node_name, ps.result, pod_key(pod))
        return None

    def unreserve(self, state: CycleState, pod: Obj, node_name: str) -> None:
        ps = self._state(state)
        if ps.skip:
            return
        self.cache.release(pod_key(pod), node_name)
        ps.result = None

    def pre_bind(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        return self._write_allocation(state, node_name, pod)
