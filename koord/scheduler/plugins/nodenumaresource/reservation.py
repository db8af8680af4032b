"""NodeNUMAResource's reservation hooks (Koordinator's ``nodenumaresource/reservation.go``): the CPUs and
NUMA resources a reservation holds on a node are restored to the pods it is for. Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koord.scheduler.framework import CycleState, NodeInfo, Obj, ReservationInfo, Status
from koord.scheduler.framework.extension import ReservationHooks as ProfileHooks
from koord.scheduler.plugins.nodenumaresource import allocator
from koord.scheduler.plugins.nodenumaresource.allocation import NodeAllocation, PodAllocation, add_numa
from koord.scheduler.plugins.nodenumaresource.manager import ResourceManager
from koord.scheduler.plugins.nodenumaresource.restorestate import (
    EMPTY_RESTORE,
    NodeRestoreState,
    ReusableAlloc,
    sub_numa,
)
from koordshared.apis.scheduling.reservation import reserve_pod

RESTORE_KEY = "NodeNUMAResource/reservationRestoreState"
ERR_NOMINATED_NOT_FIT = "pod has a nominated reservation but cannot be allocated within its NUMA scope"


def reservation_changed(manager: ResourceManager, old: Obj | None, new: Obj) -> None:
    """A Reservation as its reserve pod (Koordinator's ``NewReservationToPodEventHandler``): an Available
    one holds what its ``resource-status`` says on its node; a finished or unplaced one nothing."""
    manager.pod_updated(None if old is None else reserve_pod(old), reserve_pod(new))


def reservation_deleted(manager: ResourceManager, r: Obj) -> None:
    manager.pod_deleted(reserve_pod(r))


class ReservationHooks:
    """The hooks, mixed into the plugin (which owns ``manager``)."""

    manager: ResourceManager
    profile_hooks: ProfileHooks | None = None

    def use_reservation_hooks(self, hooks: ProfileHooks) -> None:
        self.profile_hooks = hooks

    # ---- cycle state --------------------------------------------------------------------------------

    @staticmethod
    def _restores(state: CycleState) -> dict[str, NodeRestoreState]:
        got = state.get(RESTORE_KEY)
        if not isinstance(got, dict):
            got = {}
            state.write(RESTORE_KEY, got)
        return got

    def restore_state(self, state: CycleState, node: str) -> NodeRestoreState:
        return self.restore_states(state).get(node, EMPTY_RESTORE)

    @staticmethod
    def restore_states(state: CycleState) -> Mapping[str, NodeRestoreState]:
        """Every node's restore state of this cycle (a node not in it: :data:`EMPTY_RESTORE`)."""
        got = state.get(RESTORE_KEY)
        return got if isinstance(got, dict) else {}

    def clear_restore_state(self, state: CycleState) -> None:
        """Per node for the whole cluster: dropped once Reserve is done with it."""
        state.delete(RESTORE_KEY)

    # ---- restoring ----------------------------------------------------------------------------------

    def pre_restore_reservation(self, state: CycleState, pod: Obj) -> Status | None:
        self._restores(state)
        return None

    def _reusable(self, node: str, reservations: Sequence[ReservationInfo]) -> dict[str, ReusableAlloc]:
        out: dict[str, ReusableAlloc] = {}
        for r in reservations:
            uid = r.uid
            held = self.manager.held_by(node, uid)
            if held is None:
                continue
            allocatable = held.numa_map()
            owned = [a for u in r.assigned_pods if (a := self.manager.held_by(node, u)) is not None]
            allocated = add_numa(*(a.numa_map() for a in owned)) if allocatable else {}
            remained = sub_numa(allocatable, allocated) if allocatable else {}
            taken: frozenset[int] = frozenset()
            remain = held.cpus
            for a in owned:
                taken |= held.cpus & a.cpus
                remain -= a.cpus
            if allocatable or remain or held.cpus:
                out[uid] = ReusableAlloc(
                    r, uid, r.allocate_policy, held.cpus, taken, remain, allocatable, allocated, remained
                )
        return out

    def restore_reservation(
        self,
        state: CycleState,
        pod: Obj,
        matched: Sequence[ReservationInfo],
        unmatched: Sequence[ReservationInfo],
        node_info: NodeInfo,
    ) -> tuple[Any, Status | None]:
        with self.manager.locked():
            m = self._reusable(node_info.name, matched)
            u = self._reusable(node_info.name, unmatched)
        if not m and not u:
            return None, None
        restore = NodeRestoreState(matched=m, unmatched=u).merge()
        self._restores(state)[node_info.name] = restore
        return restore, None

    # ---- allocating with a nominated reservation ----------------------------------------------------

    def nominated_reservation(self, state: CycleState, pod: Obj, node: str) -> ReservationInfo | None:
        """The reservation the pod will use on ``node``, as the Reservation plugin nominates it (the same
        answer for the whole cycle); ``None``: none, or no Reservation plugin in the profile."""
        if self.profile_hooks is None:
            return None
        chosen, _ = self.profile_hooks.nominate(state, pod, node)
        return chosen

    def allocate_with_nominated(
        self,
        state: CycleState,
        pod: Obj,
        node: str,
        na: NodeAllocation,
        ro: allocator.ResourceOptions,
        restore: NodeRestoreState,
    ) -> tuple[PodAllocation | None, Status | None]:
        """``allocateWithNominated``: ``(None, None)`` when the pod has no reservation here holding CPUs
        or NUMA resources (it then takes from the node)."""
        if not restore.matched:
            return None, None
        r = self.nominated_reservation(state, pod, node)
        if r is None:
            if ro.required_from_reservation:
                return None, Status.unschedulable("no nominated reservation")
            return None, None
        alloc = restore.matched.get(r.uid)
        if alloc is None:
            return None, None
        result, st = allocator.from_reusable(na, ro, restore, {alloc.uid: alloc})
        if st is not None:
            return None, st
        if result is None:
            return None, Status.unschedulable(ERR_NOMINATED_NOT_FIT)
        return result, None

    def filter_reservation(
        self, state: CycleState, pod: Obj, reservation: ReservationInfo, node_name: str
    ) -> Status | None:
        """Koordinator's ``FilterReservation`` lets every reservation through: the fit is decided at
        nomination (``filter_nominate_reservation``)."""
        return None
