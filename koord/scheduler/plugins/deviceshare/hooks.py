"""DeviceShare's reservation hooks (Koordinator's ``ReservationRestorePlugin``, ``ReservationFilterPlugin``,
``ReservationScorePlugin`` and ``ReservationPreBindPlugin`` of ``deviceshare/reservation.go``), the part of
the plugin the Reservation plugin calls, and the writing of an allocation shared by PreBind and
PreBindReservation.

The hooks take the reservations as the Reservation plugin hands them (the framework's
:class:`~koord.scheduler.framework.ReservationInfo`: uid, reserve pod, owners placed in it, allocate
policy). ``use_reservation_hooks`` gives the plugin the profile's hooks, from which it learns the
reservation nominated for the pod (Score, Reserve).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from koord.scheduler.framework import (
    CycleState,
    NodeInfo,
    Obj,
    PodInfo,
    ReservationInfo,
    SchedulerHandle,
    Status,
    Store,
)
from koord.scheduler.framework.extension import ReservationHooks as ProfileHooks
from koord.scheduler.plugins.deviceshare import resources as rs
from koord.scheduler.plugins.deviceshare import scoring
from koord.scheduler.plugins.deviceshare.allocator import Allocator
from koord.scheduler.plugins.deviceshare.cache import DeviceCache
from koord.scheduler.plugins.deviceshare.devicepick import AllocationFailed
from koord.scheduler.plugins.deviceshare.requests import DeviceRequestError, pod_device_requests
from koord.scheduler.plugins.deviceshare.reservation import (
    RESTORE_KEY,
    NodeRestore,
    RestoreState,
    Reusable,
    node_restore,
    restore_state,
    reusables,
    score_with,
    try_from_reusable,
)
from koord.scheduler.plugins.deviceshare.resources import ByType
from koord.scheduler.plugins.deviceshare.scoring import Scorer
from koord.scheduler.plugins.deviceshare.state import STATE_KEY, PodDeviceState
from koordshared.apis.core.pod import pod_key
from koordshared.apis.extension.deviceshare import (
    ANNOTATION_DEVICE_ALLOCATED,
    DeviceAllocation,
    format_device_allocations,
)
from koordshared.apis.scheduling import device as dv


class ReservationHooks:
    """Mixed into :class:`~.plugin.DeviceShare`, which sets these."""

    handle: SchedulerHandle
    cache: DeviceCache
    scorer: Scorer
    devices: Store
    _reservation_hooks: ProfileHooks | None
    _device_ids: dict[str, tuple[Obj, dict[tuple[str, int], str]]]
    """Node -> (its Device object, each device's id by type and minor), read once per Device object."""

    def _state(self, state: CycleState) -> PodDeviceState:
        found = state.get(STATE_KEY)
        if not isinstance(found, PodDeviceState):
            raise RuntimeError("DeviceShare: no PreFilter state for this cycle")
        return found

    def _write_allocation(self, state: CycleState, node_name: str, pod: Obj | None = None) -> Status | None:
        """``preBindObject``: the allocation, with the Device's ids, into the merged PATCH (of ``pod``; else
        of a Reservation)."""
        ps = self._state(state)
        if ps.skip or ps.result is None:
            return None  # no Device on the node: the devices are the kubelet's to pick
        device = self.devices.get(node_name)
        if device is None:
            return Status.error(f"Device {node_name} not found")
        kept = self._device_ids.get(node_name)
        if kept is not None and kept[0] is device:
            ids = kept[1]
        else:  # a GPU pod per PreBind would parse its node's whole Device otherwise
            ids = dv.device_ids(device)
            self._device_ids[node_name] = (device, ids)
        ps.result = {
            t: [
                DeviceAllocation(a.minor, a.resources, ids.get((t, a.minor), a.id), a.vfs, a.template)
                for a in allocs
            ]
            for t, allocs in ps.result.items()
        }
        text = format_device_allocations(ps.result)
        if pod is not None:
            self.cache.written(pod_key(pod), node_name, text)
        self.handle.patch_pod(state, {"metadata": {"annotations": {ANNOTATION_DEVICE_ALLOCATED: text}}})
        return None

    # ---- reservations (Koordinator's ReservationRestorePlugin, ReservationFilterPlugin,
    # ReservationScorePlugin and ReservationPreBindPlugin) -----------------------------------------

    def use_reservation_hooks(self, hooks: ProfileHooks) -> None:
        """The profile's reservation hooks: which reservation the pod is nominated to (Score, Reserve)."""
        self._reservation_hooks = hooks

    def _nominated(self, state: CycleState, pod: Obj, node: str) -> str:
        """The uid of the reservation nominated for the pod on ``node`` ("": none)."""
        if self._reservation_hooks is None:
            return ""
        reservation, _ = self._reservation_hooks.nominate(state, pod, node)
        return "" if reservation is None else str(reservation.uid)

    def pre_restore_reservation(self, state: CycleState, pod: Obj) -> Status | None:
        info = state.pod_info if state.pod_info is not None else PodInfo(pod)
        try:
            requests = pod_device_requests(info.requests)
        except DeviceRequestError as err:
            return Status.unresolvable(str(err))
        state.write(RESTORE_KEY, RestoreState(skip=not requests))
        return None

    def restore_reservation(
        self,
        state: CycleState,
        pod: Obj,
        matched: Sequence[ReservationInfo],
        unmatched: Sequence[ReservationInfo],
        node_info: NodeInfo,
    ) -> tuple[Any, Status | None]:
        """What the node's reservations hold of its devices, for Filter, Score and Reserve."""
        restore = restore_state(state)
        nd = self.cache.get(node_info.name)
        if restore.skip or nd is None:
            return None, None
        node = NodeRestore(reusables(nd, matched), reusables(nd, unmatched))
        node.merge()
        restore.nodes[node_info.name] = node
        state.write(RESTORE_KEY, restore)
        return node, None

    def filter_reservation(
        self, state: CycleState, pod: Obj, reservation: ReservationInfo, node_name: str
    ) -> Status | None:
        return None

    def _with_reservation(
        self, state: CycleState, pod: Obj, reservation: ReservationInfo, node_name: str, scored: bool
    ) -> tuple[Allocator, PodDeviceState, NodeRestore, list[Reusable], ByType] | None:
        ps = self._state(state)
        nd = self.cache.get(node_name)
        info = self.handle.node_info(node_name)
        restore = node_restore(state, node_name)
        chosen = [r for r in restore.matched if r.reservation.uid == reservation.uid]
        if ps.skip or nd is None or info is None or not chosen:
            return None
        basic = rs.append_allocated(None, restore.unmatched_used, ps.preemptible.get(node_name))
        return Allocator(ps, nd, info.node, self.scorer if scored else None), ps, restore, chosen, basic

    def filter_nominate_reservation(
        self, state: CycleState, pod: Obj, reservation: ReservationInfo, node_name: str
    ) -> Status | None:
        """Whether the pod's devices can come from ``reservation`` (as its policy allows)."""
        found = self._with_reservation(state, pod, reservation, node_name, scored=False)
        if found is None:
            return None
        allocator, ps, restore, chosen, basic = found
        with allocator.nd.lock:
            try:
                try_from_reusable(
                    allocator, ps, restore, chosen, node_name, basic, ps.reservation_ignored, True
                )
            except AllocationFailed as failed:
                return failed.status
        return None

    def score_reservation(
        self, state: CycleState, pod: Obj, reservation: ReservationInfo, node_name: str
    ) -> int:
        """The node's device score with the pod allocated from ``reservation``, per device type asked for
        (0..100; Koordinator normalises the sum over the reservations instead)."""
        found = self._with_reservation(state, pod, reservation, node_name, scored=True)
        if found is None:
            return 0
        allocator, ps, restore, chosen, basic = found
        with allocator.nd.lock:
            try:
                raw = score_with(allocator, ps, restore, chosen[0], node_name, basic)
            except AllocationFailed:
                return 0
        return min(raw // max(len(ps.requests), 1), scoring.MAX)

    def pre_bind_reservation(
        self, state: CycleState, reservation: ReservationInfo, node_name: str
    ) -> Status | None:
        """A reserve pod's devices are written on its Reservation (Koordinator's ``PreBindReservation``)."""
        return self._write_allocation(state, node_name)
