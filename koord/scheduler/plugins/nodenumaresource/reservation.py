"""NodeNUMAResource's reservation hooks (Koordinator's ``nodenumaresource/reservation.go``): the CPUs and
NUMA resources a reservation holds on a node are restored to the pods it is for.

- ``restore_reservation`` (per node, on the Reservation plugin's call): for each reservation on the node,
  what it holds (its reserve pod's placement), what its owners already took and what remains. Matched
  reservations (the pod is one of their owners) offer their remains; the others only give back what their
  owners took (those owners count on the node themselves).
- ``filter_nominate_reservation``: the pod fits in that reservation's CPUs and NUMA share.
- Allocation with a nominated reservation: ``Aligned`` takes the reservation's CPUs first and the node's
  after; ``Restricted`` only the reservation's. A pod whose nominated reservation cannot hold it does not
  fall back to the node's free CPUs (that would take what the reservation keeps for others).
- ``pre_bind_reservation``: a reservation placed by the scheduler carries ``resource-status`` like a pod.

A reservation is read through :func:`reservation_uid` and friends (the Reservation plugin's
``ReservationInfo``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from koord.scheduler.framework import CycleState, NodeInfo, Obj, Status
from koord.scheduler.plugins.nodenumaresource import allocator
from koord.scheduler.plugins.nodenumaresource.allocation import NodeAllocation, PodAllocation, add_numa
from koord.scheduler.plugins.nodenumaresource.manager import ResourceManager
from koord.scheduler.plugins.nodenumaresource.restorestate import (
    EMPTY_RESTORE,
    NodeRestoreState,
    ReusableAlloc,
    sub_numa,
)

RESTORE_KEY = "NodeNUMAResource/reservationRestoreState"
ERR_NOMINATED_NOT_FIT = "pod has a nominated reservation but cannot be allocated within its NUMA scope"


def reservation_uid(r: Any) -> str:
    uid = getattr(r, "uid", None)
    return str(uid() if callable(uid) else uid or "")


def assigned_uids(r: Any) -> list[str]:
    """The UIDs of the pods already using the reservation (``AssignedPods``)."""
    pods = getattr(r, "assigned_pods", None) or {}
    items: Iterable[Any] = pods.keys() if isinstance(pods, dict) else pods
    return [str(p if isinstance(p, str) else getattr(p, "uid", "")) for p in items]


def allocate_policy(r: Any) -> str:
    got = getattr(r, "allocate_policy", "")
    return str(got() if callable(got) else got or "")


class ReservationHooks:
    """The hooks, mixed into the plugin (which owns ``manager``)."""

    manager: ResourceManager

    # ---- cycle state --------------------------------------------------------------------------------

    @staticmethod
    def _restores(state: CycleState) -> dict[str, NodeRestoreState]:
        got = state.get(RESTORE_KEY)
        if not isinstance(got, dict):
            got = {}
            state.write(RESTORE_KEY, got)
        return got

    def restore_state(self, state: CycleState, node: str) -> NodeRestoreState:
        got = state.get(RESTORE_KEY)
        return got.get(node, EMPTY_RESTORE) if isinstance(got, dict) else EMPTY_RESTORE

    def clear_restore_state(self, state: CycleState) -> None:
        """Per node for the whole cluster: dropped once Reserve is done with it."""
        state.delete(RESTORE_KEY)

    # ---- restoring ----------------------------------------------------------------------------------

    def pre_restore_reservation(self, state: CycleState, pod: Obj) -> Status | None:
        self._restores(state)
        return None

    def _reusable(self, node: str, reservations: Sequence[Any]) -> dict[str, ReusableAlloc]:
        out: dict[str, ReusableAlloc] = {}
        for r in reservations:
            uid = reservation_uid(r)
            held = self.manager.held_by(node, uid)
            if held is None:
                continue
            allocatable = held.numa_map()
            owned = [a for u in assigned_uids(r) if (a := self.manager.held_by(node, u)) is not None]
            allocated = add_numa(*(a.numa_map() for a in owned)) if allocatable else {}
            remained = sub_numa(allocatable, allocated) if allocatable else {}
            taken: frozenset[int] = frozenset()
            remain = held.cpus
            for a in owned:
                taken |= held.cpus & a.cpus
                remain -= a.cpus
            if allocatable or remain or held.cpus:
                out[uid] = ReusableAlloc(
                    r, uid, allocate_policy(r), held.cpus, taken, remain, allocatable, allocated, remained
                )
        return out

    def restore_reservation(
        self,
        state: CycleState,
        pod: Obj,
        matched: Sequence[Any],
        unmatched: Sequence[Any],
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

    def nominated_reservation(self, state: CycleState, pod: Obj, node: str) -> Any:
        """The reservation the pod will use on ``node``, as the Reservation plugin nominated it (written
        in the cycle state under its key); ``None``: none."""
        got = state.get(NOMINATED_KEY)
        return got.get(node) if isinstance(got, dict) else None

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
        alloc = restore.matched.get(reservation_uid(r))
        if alloc is None:
            return None, None
        result, st = allocator.from_reusable(na, ro, restore, {alloc.uid: alloc})
        if st is not None:
            return None, st
        if result is None:
            return None, Status.unschedulable(ERR_NOMINATED_NOT_FIT)
        return result, None

    def filter_reservation(
        self, state: CycleState, pod: Obj, reservation: Any, node_name: str
    ) -> Status | None:
        return None


NOMINATED_KEY = "Reservation/nominated"
"""Where the Reservation plugin leaves the reservation nominated per node (read by
:meth:`ReservationHooks.nominated_reservation`)."""
