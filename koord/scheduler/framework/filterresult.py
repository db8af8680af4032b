"""What a Filter search found (:class:`FilterResult`): the feasible nodes, how far the search went, and why
each rejected node failed, kept as arrays of node positions per distinct reason and worked out only when
asked (the cycle that finds a node never asks; FailedScheduling and ``/debug/explain`` do); and why a pod
fits no node in kube-scheduler's words (:func:`fit_message`), e.g.
``0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint(s).``"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from koord.scheduler.framework.interface import CodedVerdicts, CycleState, Status
from koord.scheduler.framework.profile import Enabled
from koord.scheduler.framework.snapshot import NodeSet
from koord.scheduler.framework.types import Obj


@dataclass
class FilterResult:
    nodes: NodeSet
    """The nodes searched, in search order."""
    feasible: NodeSet
    processed: int
    """How many of ``nodes`` the search went through (the next cycle starts after them)."""
    state: CycleState
    pod: Obj
    plugins: list[Enabled]
    failed: dict[int, tuple[int, Status | None]] = field(default_factory=dict)
    """Position in ``nodes`` -> (index of the rejecting plugin in ``plugins``, its status if known): the
    nodes judged one by one."""
    rejected: list[tuple[int, np.ndarray]] = field(default_factory=list)
    """(index of a batch plugin that answered with a boolean array, the positions it rejected): kept
    as arrays, since a plugin may reject thousands of nodes in a cycle that never asks why."""
    grouped: list[tuple[int, Status, np.ndarray]] = field(default_factory=list)
    """(index of a batch plugin that answered with statuses, one distinct Status it gave, the positions
    it gave it to): thousands of nodes rejected with a handful of Status objects stay a few arrays."""

    def groups(self) -> tuple[list[tuple[Status, np.ndarray]], list[tuple[int, Status]]]:
        """Why nodes failed, for every rejected node the search went through, each Status tagged with
        its plugin: the distinct statuses batch plugins gave many nodes, with the positions in ``nodes``
        each rejected; and the nodes with a reason of their own (judged one by one, or rejected by a
        boolean batch answer, whose plugin is then asked ``filter`` on the node) as (position, Status)."""
        limit = self.processed
        cut = limit < len(self.nodes)
        grouped: list[tuple[Status, np.ndarray]] = []
        for pi, st, positions in self.grouped:
            at = positions[positions < limit] if cut else positions
            if len(at):
                grouped.append((st.with_plugin(self.plugins[pi].name), at))
        raw = [(pos, pi, known) for pos, (pi, known) in self.failed.items() if pos < limit]
        for pi, positions in self.rejected:
            at = positions[positions < limit] if cut else positions
            explained = self._whys(pi, at)
            if explained is None:
                raw += [(pos, pi, None) for pos in at.tolist()]
            else:
                grouped += explained
        tagged: dict[tuple[int, int], Status] = {}  # a status shared by many nodes is tagged once
        singles: list[tuple[int, Status]] = []
        for pos, pi, known in raw:
            st = known or self._why(pi, pos)
            got = tagged.get((pi, id(st)))
            if got is None:
                got = tagged[(pi, id(st))] = st.with_plugin(self.plugins[pi].name)
            singles.append((pos, got))
        return grouped, singles

    def _whys(self, pi: int, positions: np.ndarray) -> list[tuple[Status, np.ndarray]] | None:
        """A boolean answer's reasons for all its rejections at once, grouped, when the plugin can give
        them (``why_nodes``) and the nodes have rows; ``None``: ask node by node."""
        e = self.plugins[pi]
        why_nodes = getattr(e.plugin, "why_nodes", None)
        if why_nodes is None or self.nodes.rows is None or not len(positions):
            return None
        keep = np.zeros(len(self.nodes), dtype=bool)
        keep[positions] = True
        answer: CodedVerdicts = why_nodes(self.state, self.pod, self.nodes.subset(keep))
        codes = np.asarray(answer.codes)
        order = np.sort(positions)  # subset keeps node order
        out: list[tuple[Status, np.ndarray]] = []
        for k, st in enumerate(answer.statuses):
            at = order[codes == k]
            if len(at):
                why = st or Status.unschedulable(f"node(s) rejected by {e.name}")
                out.append((why.with_plugin(e.name), at))
        return out

    def _why(self, pi: int, pos: int) -> Status:
        """A boolean answer's reason: the plugin's ``filter`` on that one node."""
        e = self.plugins[pi]
        why = e.plugin.filter(self.state, self.pod, self.nodes.info(pos))
        return why or Status.unschedulable(f"node(s) rejected by {e.name}")

    def statuses(self) -> dict[str, Status]:
        """Node name -> why it failed, for every rejected node the search went through."""
        grouped, singles = self.groups()
        out: dict[str, Status] = {}
        for st, positions in grouped:
            out.update(dict.fromkeys(self.nodes.names_at(positions), st))
        if singles:
            names = self.nodes.names_at([pos for pos, _ in singles])
            out.update(zip(names, [st for _, st in singles], strict=True))
        return out


NO_NODE_AVAILABLE = "0/{} nodes are available"


def fit_message(
    num_nodes: int,
    statuses: Mapping[str, Status],
    *,
    absent: Status | None = None,
    pre_filter: Status | None = None,
    post_filter: str = "",
) -> str:
    """Why a pod fits no node in kube-scheduler's words (``FitError.Error``), as FailedScheduling Events and
    the ``PodScheduled=False`` condition say it: each reason counted across nodes, the counts sorted as
    strings (nodes without a status count with ``absent``'s reasons); a PreFilter rejection replaces the
    histogram (its message ends in one period); a PostFilter (preemption) message is appended as it is."""
    msg = NO_NODE_AVAILABLE.format(num_nodes) + ":"
    if pre_filter is not None:
        # A rejection quoting another pod's fit message (a gang's) already ends in its period.
        msg += f" {(pre_filter.message or 'rejected by ' + pre_filter.plugin).removesuffix('.')}."
    else:
        counts: Counter[str] = Counter()
        for st in statuses.values():
            for reason in st.reasons or (f"node(s) rejected by {st.plugin}",):
                counts[reason] += 1
        missing = num_nodes - len(statuses)
        if absent is not None and missing > 0:
            for reason in absent.reasons:
                counts[reason] += missing
        histogram = sorted(f"{n} {reason}" for reason, n in counts.items())
        if histogram:
            msg += f" {', '.join(histogram)}."
    if post_filter:
        msg += f" {post_filter}"
    return msg
