"""Why a pod fits no node (kube-scheduler's ``framework.FitError``): the statuses the cycle gathered, the
PreFilter rejection and the PostFilter (preemption) message, and the plugins that rejected the pod (they
decide which cluster events requeue it). The message is
:func:`~koord.scheduler.framework.filterresult.fit_message`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from koord.scheduler.framework.filterresult import fit_message
from koord.scheduler.framework.interface import Code, Status


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

    def __str__(self) -> str:
        d = self.diagnosis
        return fit_message(
            self.num_nodes, d.statuses, pre_filter=d.pre_filter, post_filter=d.post_filter_message
        )
