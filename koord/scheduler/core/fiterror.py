"""Why a pod fits no node, in kube-scheduler's words (``framework.FitError``): the message operators see in
``FailedScheduling`` Events and the ``PodScheduled=False`` condition, e.g.

    0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: gpu}.
    preemption: 0/5 nodes are available: 5 No preemption victims found for incoming pod.

Each node's reasons are counted across nodes and the counts sorted as strings, as kube-scheduler does; a
PreFilter rejection replaces the histogram; the PostFilter (preemption) message is appended.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from koord.scheduler.framework.interface import Code, Status

NO_NODE_AVAILABLE = "0/{} nodes are available"


@dataclass
class Diagnosis:
    statuses: dict[str, Status] = field(default_factory=dict)
    """Node -> why it failed (every node searched)."""
    pre_filter: Status | None = None
    """The PreFilter rejection, when PreFilter failed the pod on every node."""
    post_filter_message: str = ""
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)

    def record(self, statuses: Mapping[str, Status]) -> None:
        self.statuses.update(statuses)
        for st in statuses.values():
            self._plugin(st)

    def _plugin(self, st: Status) -> None:
        if not st.plugin:
            return
        if st.code is Code.PENDING:
            self.pending_plugins.add(st.plugin)
        else:
            self.unschedulable_plugins.add(st.plugin)

    def reject_all(self, st: Status, nodes: int) -> None:
        self.pre_filter = st
        self._plugin(st)


class FitError(Exception):
    """No node fits the pod; ``str()`` is the operator's message."""

    def __init__(self, pod_key: str, num_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__(pod_key)
        self.pod_key = pod_key
        self.num_nodes = num_nodes
        self.diagnosis = diagnosis

    @property
    def unresolvable(self) -> bool:
        """Nothing preemption could do (every node failed unresolvably, or PreFilter said so)."""
        d = self.diagnosis
        if d.pre_filter is not None:
            return d.pre_filter.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return bool(d.statuses) and all(
            st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE for st in d.statuses.values()
        )

    def __str__(self) -> str:
        d = self.diagnosis
        msg = NO_NODE_AVAILABLE.format(self.num_nodes) + ":"
        if d.pre_filter is not None:
            msg += f" {d.pre_filter.message or 'rejected by ' + d.pre_filter.plugin}."
        else:
            counts: Counter[str] = Counter()
            for st in d.statuses.values():
                for reason in st.reasons or (f"node(s) rejected by {st.plugin}",):
                    counts[reason] += 1
            histogram = sorted(f"{n} {reason}" for reason, n in counts.items())
            if histogram:
                msg += f" {', '.join(histogram)}."
        if d.post_filter_message:
            msg += f" {d.post_filter_message}."
        return msg
