"""Whether a pod fits a node with one of its reservations (Koordinator's ``filterWithReservations``,
``fitsNode``, ``fitsReservation``). Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from koord.scheduler.framework import NodeInfo, ReservationInfo
from koord.scheduler.framework.types import CPU, EPHEMERAL, MEMORY, PODS
from koord.scheduler.plugins.reservation.args import ReservationArgs
from koord.scheduler.plugins.reservation.state import NodeState

PREFIX = "Reservation(s) "
"""Reservation-level reasons start with this (Koordinator's ``ErrReasonPrefix``); PostFilter skips them."""
NO_RESERVATION_FITS = "node(s) no reservation(s) to meet the requirements"
_NATIVE = (CPU, MEMORY, EPHEMERAL)
_NONE: Mapping[str, int] = MappingProxyType({})


def fits_node(
    request: Mapping[str, int],
    node: NodeInfo,
    pod_requested: Mapping[str, int],
    r_allocated: Mapping[str, int],
    remained: Mapping[str, int],
    args: ReservationArgs,
    preemptible: Mapping[str, int] = _NONE,
) -> list[str]:
    """The resources the node lacks for the pod (``pods`` first), counting ``remained`` (and what
    preemption's victims would free) as free."""
    out = []
    allowed = node.allocatable.get(PODS, 0)
    if node.requested.get(PODS, 0) + 1 > allowed:
        out.append(PODS)
    if not any(v for n, v in request.items() if n != PODS):
        return out

    def free(name: str) -> int:
        used = pod_requested.get(name, 0) - remained.get(name, 0) - r_allocated.get(name, 0)
        return node.allocatable.get(name, 0) - used + preemptible.get(name, 0)

    for name in _NATIVE:
        if request.get(name, 0) > free(name):
            out.append(name)
    for name in sorted(request):
        if name in _NATIVE or name == PODS or args.ignored(name):
            continue
        if request[name] > free(name):
            out.append(name)
    return out


def fits_reservation(
    request: Mapping[str, int],
    r: ReservationInfo,
    detailed: bool,
    args: ReservationArgs,
    preemptible: Mapping[str, int] = _NONE,
) -> list[str]:
    """Why a Restricted reservation cannot take the pod (empty: it can), counting what preemption's
    victims inside it would free."""
    out = []
    if PODS in r.allocatable:
        used, capacity = r.allocated_pods - preemptible.get(PODS, 0), r.allocatable[PODS]
        if used + 1 > capacity:
            why = (
                f"Too many pods, requested: 1, used: {used}, capacity: {capacity}"
                if detailed
                else "Too many pods"
            )
            out.append(PREFIX + why)
    for name in r.resource_names:
        if args.ignored(name) or not request.get(name):
            continue
        capacity = r.allocatable.get(name, 0) - r.reserved.get(name, 0)
        used = max(r.allocated.get(name, 0) - preemptible.get(name, 0), 0)
        if request[name] <= capacity - used:
            continue
        if detailed:
            out.append(
                f"{PREFIX}Insufficient {name}, requested: {request[name]}, used: {used}, capacity: {capacity}"
            )
        else:
            out.append(f"{PREFIX}Insufficient {name}")
    return out


def fits_one(
    request: Mapping[str, int],
    node: NodeInfo,
    ns: NodeState,
    r: ReservationInfo,
    detailed: bool,
    args: ReservationArgs,
    preemptible: Mapping[str, int] = _NONE,
    preemptible_in: Mapping[str, int] = _NONE,
) -> tuple[list[str], list[str]]:
    """``fitsNodeAndReservation``: (what the node lacks, why the reservation refuses); both empty: fits.
    ``preemptible``/``preemptible_in``: what preemption's victims free on the node, and inside ``r``."""
    freed = {n: preemptible.get(n, 0) + preemptible_in.get(n, 0) for n in {*preemptible, *preemptible_in}}
    by_node = fits_node(request, node, ns.pod_requested, ns.r_allocated, r.available, args, freed)
    by_reservation: list[str] = []
    if r.allocate_policy == "Restricted":
        by_reservation = fits_reservation(request, r, detailed, args, preemptible_in)
    elif not by_node:
        return [], []
    if not by_node and not by_reservation:
        return [], []
    return by_node, by_reservation


def by_node(resources: list[str]) -> list[str]:
    return [f"Insufficient {name} by node" for name in resources]
