"""What the Reservation plugin keeps in a pod's cycle state (Koordinator's ``stateData``,
``nodeReservationState``, ``nodeDiagnosisState``): per node, the reservations the pod may use (matched) and
those it may not but whose owners are on the node (unmatched), the node's requests as the fit checks count
them, why owned reservations did not match (for the PostFilter message), the reservation nominated per
node, and the one the pod was placed in.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from koord.scheduler.framework import CycleState, ReservationInfo
from koord.scheduler.framework.types import PODS, Resources

STATE_KEY = "Reservation"


@dataclass
class NodeState:
    node: str
    matched: list[ReservationInfo]
    unmatched: list[ReservationInfo]
    pod_requested: Resources = field(default_factory=dict)
    """The node's requests with the unmatched reservations' owners no longer counted twice, and the
    matched reservations' reserve pods still counted (Koordinator's ``podRequested``)."""
    r_allocated: Resources = field(default_factory=dict)
    """What the owners of the matched reservations use."""


@dataclass
class Diagnosis:
    """Why the reservations whose owners include the pod were not matched on one node."""

    ignored: int = 0
    owner_matched: int = 0
    name_matched: int = 0
    name_unmatched: int = 0
    unschedulable: int = 0
    affinity_unmatched: int = 0
    not_exact: int = 0
    taints_unmatched: int = 0
    taints: dict[str, int] = field(default_factory=dict)


@dataclass
class CycleData:
    reserve: ReservationInfo | None = None
    """For a reserve pod: its own reservation."""
    has_affinity: bool = False
    reservation_name: str = ""
    ignored: bool = False
    requests: Resources = field(default_factory=dict)
    exact: tuple[str, ...] = ()
    nodes: dict[str, NodeState] = field(default_factory=dict)
    diagnosis: dict[str, Diagnosis] = field(default_factory=dict)
    preferred_node: str = ""
    nominated: dict[str, ReservationInfo | None] = field(default_factory=dict)
    assumed: ReservationInfo | None = None
    annotated: bool = False
    """PreBind asked for ``reservation-allocated`` on the pod."""
    preemptible: dict[str, Resources] = field(default_factory=dict)
    """Preemption's what-if: per node, what the victims taken off it free (outside reservations)."""
    preemptible_in: dict[str, dict[str, Resources]] = field(default_factory=dict)
    """... and inside each reservation (node -> reservation UID -> resources)."""
    scores: np.ndarray | None = None
    """The round's scores by snapshot row, once PreScore nominated from it."""
    _shape: tuple[object, ...] | None = None

    def shape(self) -> tuple[object, ...]:
        """What of the pod the fit checks read, as a key."""
        if self._shape is None:
            self._shape = (tuple(sorted(self.requests.items())), self.has_affinity, self.reservation_name)
        return self._shape

    def clone(self) -> CycleData:
        """For preemption's what-if runs (CycleState.clone): its own nominations and what-if room."""
        out = copy.copy(self)
        out.nominated = dict(self.nominated)
        out.preemptible = {n: dict(r) for n, r in self.preemptible.items()}
        out.preemptible_in = {n: {u: dict(r) for u, r in by.items()} for n, by in self.preemptible_in.items()}
        return out

    def freed(self, node: str, reservation: str | None, requests: Mapping[str, int], sign: int) -> None:
        """A victim taken off ``node`` (``sign`` 1) or put back (-1): its requests and one pod slot, in
        the reservation it was placed in (if any) or on the node."""
        into = (
            self.preemptible.setdefault(node, {})
            if reservation is None
            else self.preemptible_in.setdefault(node, {}).setdefault(reservation, {})
        )
        for name, value in (*requests.items(), (PODS, 1)):
            into[name] = into.get(name, 0) + sign * value


def data_of(state: CycleState) -> CycleData:
    found = state.get(STATE_KEY)
    return found if isinstance(found, CycleData) else CycleData()
