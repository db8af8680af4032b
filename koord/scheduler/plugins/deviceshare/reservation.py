"""DeviceShare and reservations (Koordinator's ``deviceshare/reservation.go``): what the reservations on a
node hold of its devices, given back to a pod that may use them, and the allocation from a reservation.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from koord.scheduler.framework import CycleState, ReservationInfo, Status
from koord.scheduler.plugins.deviceshare import resources as rs
from koord.scheduler.plugins.deviceshare.allocator import Allocator
from koord.scheduler.plugins.deviceshare.devicepick import AllocationFailed
from koord.scheduler.plugins.deviceshare.nodedevice import NodeDevice
from koord.scheduler.plugins.deviceshare.resources import ByType
from koord.scheduler.plugins.deviceshare.state import PodDeviceState
from koordshared.apis.core.pod import pod_key
from koordshared.apis.extension.deviceshare import DeviceAllocations
from koordshared.apis.scheduling.reservation import AllocatePolicy

RESTORE_KEY = "DeviceShare/reservationRestoreState"
ALIGNED, RESTRICTED = AllocatePolicy.ALIGNED, AllocatePolicy.RESTRICTED
RESERVATION_REASON = "Reservation(s) "
"""Koordinator's ``NewReservationReason`` prefix for a reason a reservation could not be used."""


@dataclass(frozen=True, slots=True)
class Reusable:
    """``reusableAlloc``: one reservation's devices on the node."""

    reservation: ReservationInfo
    allocatable: ByType
    allocated: ByType
    remained: ByType


@dataclass
class NodeRestore:
    """``nodeReservationRestoreStateData``."""

    matched: list[Reusable] = field(default_factory=list)
    unmatched: list[Reusable] = field(default_factory=list)
    matched_allocatable: ByType = field(default_factory=dict)
    matched_allocated: ByType = field(default_factory=dict)
    unmatched_used: ByType = field(default_factory=dict)

    def merge(self) -> None:
        """``mergeReservationAllocations``."""
        for r in self.unmatched:
            used = rs.subtract_allocated(rs.copy_by_type(r.allocatable), r.remained, True)
            rs.append_allocated(self.unmatched_used, used)
        for r in self.matched:
            rs.append_allocated(self.matched_allocatable, r.allocatable)
            rs.append_allocated(self.matched_allocated, r.allocated)


@dataclass
class RestoreState:
    skip: bool = True
    nodes: dict[str, NodeRestore] = field(default_factory=dict)


def restore_state(state: CycleState) -> RestoreState:
    found = state.get(RESTORE_KEY)
    return found if isinstance(found, RestoreState) else RestoreState()


def node_restore(state: CycleState, node: str) -> NodeRestore:
    return restore_state(state).nodes.get(node) or NodeRestore()


def reusables(nd: NodeDevice, reservations: Sequence[ReservationInfo]) -> list[Reusable]:
    """The reservations that hold devices on the node, with what their owners took of them."""
    out = []
    with nd.lock:
        for r in reservations:
            allocatable = nd.held_by(pod_key(r.pod))
            if not allocatable:
                continue
            hints = rs.minor_sets(allocatable)
            allocated: ByType = {}
            for owner in r.assigned_pods.values():
                taken = nd.held_by(f"{owner.namespace}/{owner.name}")
                if taken:
                    rs.append_allocated_by_hints(hints, allocated, taken)
            remained = rs.subtract_allocated(rs.copy_by_type(allocatable), allocated, False)
            out.append(Reusable(r, allocatable, allocated, remained))
    return out


def required_devices(r: Reusable, preemptible_in_rr: ByType | None) -> ByType:
    """``calcRequiredDeviceResources``: what a Restricted reservation still offers (each reserved device
    present, with nothing when nothing is left)."""
    hints = rs.minor_sets(r.allocatable)
    required = rs.append_allocated_by_hints(hints, None, r.remained, preemptible_in_rr)
    if not required:
        required = {t: {m: {} for m in minors} for t, minors in hints.items()}
    return required


def try_from_reusable(
    allocator: Allocator,
    pod_state: PodDeviceState,
    restore: NodeRestore,
    candidates: Sequence[Reusable],
    node: str,
    basic: ByType,
    ignored: bool,
    required_from_reservation: bool,
) -> DeviceAllocations | None:
    """``tryAllocateFromReusable``: the allocation from the first candidate reservation that can give it;
    ``None`` when there is none (or none fits and the pod may go outside reservations)."""
    if not candidates:
        return None
    if ignored:
        return ignoring_reservations(allocator, pod_state, restore, restore.matched, node, basic)
    basic = rs.append_allocated(None, basic, restore.matched_allocated)
    reasons: list[str] = []
    for r in candidates:
        in_rr = pod_state.preemptible_in_reservations.get(node, {}).get(r.reservation.uid)
        preferred = rs.minor_sets(r.allocatable)
        preemptible = rs.append_allocated(None, basic, r.remained, in_rr)
        policy = r.reservation.allocate_policy or ALIGNED
        try:
            if policy == ALIGNED:
                return allocator.allocate(None, preferred, None, preemptible)
            if policy == RESTRICTED:
                return allocator.allocate(preferred, preferred, required_devices(r, in_rr), preemptible)
        except AllocationFailed as failed:
            reasons.extend(failed.status.reasons)
    if required_from_reservation:
        raise AllocationFailed(Status.unschedulable(*(RESERVATION_REASON + why for why in reasons)))
    return None


def ignoring_reservations(
    allocator: Allocator,
    pod_state: PodDeviceState,
    restore: NodeRestore,
    ignored: Sequence[Reusable],
    node: str,
    basic: ByType,
) -> DeviceAllocations:
    """``tryAllocateIgnoreReservation``: the node's free devices and every reservation's unallocated part."""
    preemptible: ByType = {}
    for r in ignored:
        rs.append_allocated(
            preemptible,
            pod_state.preemptible_in_reservations.get(node, {}).get(r.reservation.uid),
            r.remained,
        )
    rs.append_allocated(preemptible, basic, restore.matched_allocated)
    return allocator.allocate(None, None, None, preemptible)


def score_with(
    allocator: Allocator,
    pod_state: PodDeviceState,
    restore: NodeRestore,
    r: Reusable,
    node: str,
    basic: ByType,
) -> int:
    """``scoreWithReservation``: the node's score for the pod allocated from ``r``."""
    basic = rs.append_allocated(None, basic, restore.matched_allocated)
    in_rr = pod_state.preemptible_in_reservations.get(node, {}).get(r.reservation.uid)
    preemptible = rs.append_allocated(None, basic, r.remained, in_rr)
    required = required_devices(r, in_rr) if r.reservation.allocate_policy == RESTRICTED else None
    return allocator.score(required, preemptible)
