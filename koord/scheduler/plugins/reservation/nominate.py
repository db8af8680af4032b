"""Which of a node's matched reservations the pod takes, and how nodes with one score (Koordinator's
``nominator.go`` and ``scoring.go``):

- the only matched one, when the pod has a reservation affinity;
- else those the ReservationFilterPlugins allow at nomination (an allocate-once reservation with an owner,
  or one the pod does not fit, is out): the only one left; else the lowest ``reservation-order`` label
  (0 or absent: none); else the highest sum of the ReservationScorePlugins' scores, the Reservation plugin's
  own being how full the reservation would be with the pod in it (most allocated, 0..100); ties go to the
  oldest reservation.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from koord.scheduler.framework import MAX_NODE_SCORE, ReservationInfo
from koordshared.apis.scheduling import reservation as rsv

MOST_PREFERRED = 1000


def order_of(r: ReservationInfo) -> int:
    raw = r.labels.get(rsv.LABEL_RESERVATION_ORDER, "")
    try:
        return int(raw) if raw else 0
    except ValueError:
        return 0


def lowest_order(rs: Sequence[ReservationInfo]) -> tuple[ReservationInfo | None, int]:
    """The reservation with the lowest non-zero order, and that order (0 when none has one)."""
    best: ReservationInfo | None = None
    order = 0
    for r in rs:
        o = order_of(r)
        if o and (best is None or o < order):
            best, order = r, o
    return best, order


def most_allocated(request: Mapping[str, int], r: ReservationInfo) -> int:
    """``ScoreReservation``: per resource the reservation holds, how full it would be with the pod
    (0 when the pod would not fit in it), averaged."""
    held = {n: v for n, v in r.allocatable.items() if v}
    if not held:
        return 0
    total = 0
    for name, capacity in held.items():
        wanted = request.get(name, 0) + r.allocated.get(name, 0)
        if wanted <= capacity:
            total += MAX_NODE_SCORE * wanted // capacity
    return total // len(held)


def normalized(scores: np.ndarray) -> np.ndarray:
    """kube-scheduler's ``DefaultNormalizeScore`` (not reversed): the best becomes 100."""
    best = int(scores.max(initial=0))
    return scores if best == 0 else MAX_NODE_SCORE * scores // best
