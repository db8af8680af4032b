"""What the framework tells plugins about a Reservation (Koordinator's ``frameworkext.ReservationInfo``,
``pkg/scheduler/frameworkext/reservation_info.go``): a value, rebuilt on every change, handed to the
FrameworkExtender's reservation hooks (:mod:`.extension`) that the Reservation plugin calls and
NodeNUMAResource, DeviceShare and third-party plugins implement.

Resources are in scheduler units (millicores for cpu, ``Value()`` for the rest), as in :class:`PodInfo`.
``allocatable`` is what the reservation holds (its ``status.allocatable`` once available, its template's
requests before); ``allocated`` what its owners placed in it use, counted only over ``resource_names``
(for a Restricted reservation, the resources it restricts); ``available`` is allocatable less allocated
less ``reserved`` (what the reservation keeps from its own owners), never below 0.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from koord.scheduler.framework.types import (
    CPU,
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    MEMORY,
    HostPort,
    Obj,
    PodInfo,
    Resources,
    resources_of,
)
from koordshared.apis.core.pod import as_list, as_map, str_map
from koordshared.apis.scheduling import reservation as rsv
from koordshared.apis.scheduling.reservation import is_reserve_pod, reserve_pod
from koordshared.apis.topology.noderesourcetopology import node_reservation
from koordshared.runtime.errors import InvalidValue

ASSUMED_RESERVATION = "framework/assumedReservation"
_EMPTY: Mapping[str, int] = MappingProxyType({})

__all__ = ["ASSUMED_RESERVATION", "PodRequirement", "ReservationInfo", "is_reserve_pod"]


@dataclass(frozen=True, slots=True)
class PodRequirement:
    """An owner placed in a reservation: who, and what it asks for."""

    namespace: str
    name: str
    uid: str
    requests: Mapping[str, int]
    ports: tuple[HostPort, ...] = ()

    @classmethod
    def of(cls, info: PodInfo) -> PodRequirement:
        return cls(
            info.namespace, info.name, info.uid, MappingProxyType(dict(info.requests)), info.host_ports
        )


@dataclass(frozen=True, slots=True, eq=False)
class ReservationInfo:
    reservation: Obj
    """The Reservation object."""
    pod: Obj
    """Its reserve pod (:func:`koordshared.apis.scheduling.reservation.reserve_pod`)."""
    resource_names: tuple[str, ...]
    allocatable: Mapping[str, int]
    reserved: Mapping[str, int]
    allocated: Mapping[str, int]
    available: Mapping[str, int]
    allocatable_ports: tuple[HostPort, ...]
    allocated_ports: tuple[HostPort, ...]
    assigned_pods: Mapping[str, PodRequirement]
    """Owner pod UID -> what it takes (Koordinator's ``AssignedPods``)."""
    owners: tuple[rsv.OwnerMatcher, ...]
    parse_error: str = ""
    """Why the owners (or the restricted options) could not be read: such a reservation matches no pod."""
    name: str = ""
    uid: str = ""
    node_name: str = ""
    """Where it was placed (``status.nodeName``)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    allocate_once: bool = True
    allocate_policy: str = ""
    available_phase: bool = False
    """Placed and Available (``is_available``)."""
    is_terminating: bool = False
    """Being deleted."""
    is_unschedulable: bool = False
    """``spec.unschedulable``, or being deleted: no new owner unless it tolerates that."""

    @classmethod
    def of(cls, reservation: Obj, assigned: Sequence[PodRequirement] = ()) -> ReservationInfo:
        pod = reserve_pod(reservation)
        pinfo = PodInfo(pod)
        allocatable = (
            resources_of(as_map(as_map(reservation, "status"), "allocatable"))
            if rsv.is_available(reservation)
            else dict(pinfo.requests)
        )
        names = tuple(sorted(allocatable))
        errors = []
        if rsv.allocate_policy(reservation) == rsv.AllocatePolicy.RESTRICTED:
            try:
                names = rsv.restricted_resources(reservation, names)
            except InvalidValue as err:
                errors.append(str(err))
        owners, owner_error = rsv.parse_owners(as_list(as_map(reservation, "spec"), "owners"))
        if owner_error:
            errors.append(owner_error)
        try:
            kept = resources_of(node_reservation(str_map(_annotations(reservation))).resources)
        except InvalidValue as err:
            errors.append(str(err))
            kept = {}
        reserved = {n: v for n, v in kept.items() if n in names}
        terminating = bool(as_map(reservation, "metadata").get("deletionTimestamp"))
        info = cls(
            reservation=reservation,
            pod=pod,
            resource_names=names,
            allocatable=MappingProxyType(allocatable),
            reserved=MappingProxyType(reserved),
            allocated=_EMPTY,
            available=_EMPTY,
            allocatable_ports=pinfo.host_ports,
            allocated_ports=(),
            assigned_pods=_EMPTY,  # type: ignore[arg-type]
            owners=owners,
            parse_error="; ".join(errors),
            name=rsv.name_of(reservation),
            uid=rsv.uid_of(reservation),
            node_name=rsv.node_of(reservation),
            labels=MappingProxyType(str_map(as_map(as_map(reservation, "metadata"), "labels"))),
            allocate_once=rsv.allocate_once(reservation),
            allocate_policy=rsv.allocate_policy(reservation),
            available_phase=rsv.is_available(reservation),
            is_terminating=terminating,
            is_unschedulable=terminating or as_map(reservation, "spec").get("unschedulable") is True,
        )
        return info._with_assigned({a.uid: a for a in assigned})

    # ---- reading --------------------------------------------------------------------------------

    @property
    def priority(self) -> int:
        prio = as_map(rsv.template_of(self.reservation), "spec").get("priority")
        return prio if isinstance(prio, int) and not isinstance(prio, bool) else 0

    @property
    def taints(self) -> Sequence[Mapping[str, Any]]:
        return [t for t in as_list(as_map(self.reservation, "spec"), "taints") if isinstance(t, Mapping)]

    @property
    def allocated_pods(self) -> int:
        return len(self.assigned_pods)

    def is_available(self) -> bool:
        return self.available_phase

    def is_matchable(self) -> bool:
        """Available, readable, and not used up (an allocate-once reservation with an owner is done,
        even before its status says Succeeded)."""
        if not self.is_available() or self.parse_error:
            return False
        return not (self.allocate_once and self.assigned_pods)

    def match_owners(self, pod: Obj) -> bool:
        return not self.parse_error and any(o.matches(pod) for o in self.owners)

    def non_zero_allocated(self) -> tuple[int, int]:
        """cpu and memory of ``allocated`` with kube-scheduler's defaults for a missing one (what the
        owners added to the node's scoring totals, as Koordinator counts it); (0, 0) without owners."""
        if not self.assigned_pods:
            return 0, 0
        a = self.allocated
        return a.get(CPU, DEFAULT_MILLI_CPU_REQUEST), a.get(MEMORY, DEFAULT_MEMORY_REQUEST)

    # ---- changes (each one a new value) ------------------------------------------------------------

    def with_reservation(self, reservation: Obj) -> ReservationInfo:
        """The same owners over a newer version of the object."""
        return ReservationInfo.of(reservation, tuple(self.assigned_pods.values()))

    def with_pod(self, owner: PodRequirement) -> ReservationInfo:
        if owner.uid in self.assigned_pods:
            return self
        return self._with_assigned({**self.assigned_pods, owner.uid: owner})

    def without_pod(self, uid: str) -> ReservationInfo:
        if uid not in self.assigned_pods:
            return self
        return self._with_assigned({k: v for k, v in self.assigned_pods.items() if k != uid})

    def _with_assigned(self, assigned: Mapping[str, PodRequirement]) -> ReservationInfo:
        names = set(self.resource_names)
        allocated: Resources = {}
        ports: list[HostPort] = []
        for owner in assigned.values():
            for n, v in owner.requests.items():
                if n in names:
                    allocated[n] = allocated.get(n, 0) + v
            ports.extend(owner.ports)
        available = {
            n: max(v - allocated.get(n, 0) - self.reserved.get(n, 0), 0) for n, v in self.allocatable.items()
        }
        return replace(
            self,
            allocated=MappingProxyType(allocated),
            available=MappingProxyType(available),
            allocated_ports=tuple(ports),
            assigned_pods=MappingProxyType(dict(assigned)),
        )

    def __repr__(self) -> str:
        return f"ReservationInfo({self.name!r} on {self.node_name or '-'}, {self.allocated_pods} owners)"


def _annotations(obj: Obj) -> Mapping[str, Any]:
    return as_map(as_map(obj, "metadata"), "annotations")
