"""What the last cycle of one pod shape worked out on every node with reservations, kept for the next pod of
that shape (owners of the same reservations come in waves): the room given back (the restored copies and
what Filter and Score read of them), why owned reservations did not match, and then the fit answers, the
nominated reservations and their scores. The next cycle looks again only at the nodes the snapshot's log
of written rows and the reservation cache's log of changes name since, so a cycle costs what changed,
not a pass over every reserved node in each extension point.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np

from koord.scheduler.framework import CycleState, NodeInfo, ReservationInfo, Status
from koord.scheduler.framework.snapshot import Snapshot
from koord.scheduler.plugins.reservation.state import Diagnosis, NodeState

SHAPES = 16
"""Pod shapes whose rounds are kept; the least recently used go first."""
STATE_KEY = "Reservation/round"
"""The cycle state's round, when the cycle's ``nodes`` and ``diagnosis`` are of one."""


@dataclass(eq=False, slots=True)
class Round:
    """One pod shape's last cycle, by node; the cycles of the shape change it as nodes change."""

    snapshot: Snapshot
    layout: int
    """The snapshot's layout then: rows moved since make the log of written rows useless."""
    written: int = -1
    """Where the snapshot's log of written rows stood once the cycle had overlaid its copies."""
    generation: int = -1
    """The reservation cache's generation the cycle read."""
    nodes: dict[str, NodeState] = field(default_factory=dict)
    diagnosis: dict[str, Diagnosis] = field(default_factory=dict)
    restored: dict[str, NodeInfo] = field(default_factory=dict)
    """The copies overlaid in the snapshot, by node (the same keys as ``nodes``)."""
    bases: dict[str, NodeInfo] = field(default_factory=dict)
    """The NodeInfos they were made of: a row written since (another shape's copy overlaid there, or
    put back) over the same NodeInfo and reservations gets its copy again, and nothing more."""
    refused: dict[str, Status] = field(default_factory=dict)
    """Filter's refusals among the nodes with matched reservations (the others pass)."""
    nominated: dict[str, ReservationInfo | None] = field(default_factory=dict)
    scores: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """The nominated reservation's score by snapshot row (0: none), for Score to read at once."""
    orders: dict[str, int] = field(default_factory=dict)
    """The nodes whose matched reservations have a ``reservation-order``: the lowest."""
    unfit: set[str] = field(default_factory=set)
    """Nodes with matched reservations examined again: their fit answers are to be worked out."""
    unnominated: set[str] = field(default_factory=set)
    """... and their nominations."""
    volatile: set[str] = field(default_factory=set)
    """Nodes whose reservations' owners read more of a pod than its shape: examined every cycle."""

    def forget(self, nodes: set[str]) -> None:
        """What was worked out on ``nodes``: they are examined again (the cycle's own ``nodes`` and
        ``diagnosis``: the last cycle's stay as they were)."""
        self.nodes, self.diagnosis = dict(self.nodes), dict(self.diagnosis)
        kept = (
            self.nodes,
            self.diagnosis,
            self.restored,
            self.bases,
            self.refused,
            self.nominated,
            self.orders,
        )
        for node in nodes:
            for by_node in kept:
                by_node.pop(node, None)
            self.score(node, 0)
        self.volatile -= nodes

    def score(self, node: str, value: int) -> None:
        row = self.snapshot.index.get(node)
        if row is None:
            return
        if row >= len(self.scores):
            grown = np.zeros(max(len(self.snapshot), row + 1), dtype=np.int64)
            grown[: len(self.scores)] = self.scores
            self.scores = grown
        self.scores[row] = value

    def changed(self, snapshot: Snapshot, cache_changed: set[str] | None) -> tuple[set[str], set[str]] | None:
        """The nodes to examine again (their reservations changed since, or their rows were written
        over another NodeInfo), and those whose copies are only to be overlaid again (their rows were
        written, over the same NodeInfo); ``None`` when that cannot be told (every node, then)."""
        if snapshot is not self.snapshot or snapshot.layout != self.layout or cache_changed is None:
            return None
        written = snapshot.names_written_since(self.written)
        if written is None:
            return None
        again = {
            node
            for node in written
            if node not in cache_changed
            and node not in self.volatile
            and (base := self.bases.get(node)) is not None
            and snapshot.underneath(node) is base
        }
        return {*written, *cache_changed, *self.volatile} - again, again


def of(state: CycleState) -> Round | None:
    found = state.get(STATE_KEY)
    return found if isinstance(found, Round) else None


class Rounds:
    """The rounds of the most recently seen pod shapes."""

    def __init__(self) -> None:
        self._kept: OrderedDict[Hashable, Round] = OrderedDict()

    def get(self, key: Hashable) -> Round | None:
        found = self._kept.get(key)
        if found is not None:
            self._kept.move_to_end(key)
        return found

    def put(self, key: Hashable, r: Round) -> None:
        self._kept[key] = r
        self._kept.move_to_end(key)
        while len(self._kept) > SHAPES:
            self._kept.popitem(last=False)

    def clear(self) -> None:
        self._kept.clear()
