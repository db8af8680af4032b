"""Why a pod fits no node, in kube-scheduler's words (``framework.FitError.Error``): the message operators
see in ``FailedScheduling`` Events and the ``PodScheduled=False`` condition, e.g.

    0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint(s).
    preemption: 0/5 nodes are available: 5 No preemption victims found for incoming pod.

Each node's reasons are counted across nodes and the counts sorted as strings; nodes without a status of
their own count with ``absent``'s reasons; a PreFilter rejection replaces the histogram; each of these ends
in a period. A PostFilter (preemption) message is appended as it is, so the message ends as the
preemption's does (in one period when that is a histogram too). The scheduler's FitError and the
preemption plugin both write it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from koord.scheduler.framework.interface import Status

NO_NODE_AVAILABLE = "0/{} nodes are available"


def fit_message(
    num_nodes: int,
    statuses: Mapping[str, Status],
    *,
    absent: Status | None = None,
    pre_filter: Status | None = None,
    post_filter: str = "",
) -> str:
    msg = NO_NODE_AVAILABLE.format(num_nodes) + ":"
    if pre_filter is not None:
        msg += f" {pre_filter.message or 'rejected by ' + pre_filter.plugin}."
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
