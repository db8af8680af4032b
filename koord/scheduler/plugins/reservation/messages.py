"""What a pod that no node took is told about the reservations it owns (Koordinator's
``makePostFilterReasons``): how many matched its owner, how many of those were not matched and why
(name, affinity, unschedulable, exact match, taints), and the node reasons that kept the rest from it,
e.g. ``1 Reservation(s) didn't match affinity rules, 2 Reservation(s) matched owner total``. Nothing when
the pod owns none and has no reservation affinity.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from koord.scheduler.framework import Status
from koord.scheduler.plugins.reservation.fit import PREFIX
from koord.scheduler.plugins.reservation.state import CycleData

ERR_AFFINITY = "node(s) no reservations match reservation affinity"
ERR_NODE_NOT_MATCH = "node(s) didn't match the nodeName specified by reservation"
ERR_POLICY_CONFLICT = "node(s) reservation allocate policy conflict"
ERR_INACTIVE = "reservation is not active"


def post_filter_reasons(data: CycleData, statuses: Mapping[str, Status]) -> list[str]:
    total = Counter[str]()
    taints = Counter[str]()
    by_node = Counter[str]()
    for node, d in data.diagnosis.items():
        total.update(
            owner=d.owner_matched,
            name=d.name_matched,
            name_unmatched=d.name_unmatched,
            unschedulable=d.unschedulable,
            affinity=d.affinity_unmatched,
            exact=d.not_exact,
        )
        taints.update(d.taints)
        left = (
            d.owner_matched
            - d.name_unmatched
            - d.unschedulable
            - d.affinity_unmatched
            - d.not_exact
            - d.taints_unmatched
        )
        if left <= 0:
            continue
        reasons = Counter[str]()
        st = statuses.get(node)
        for reason in st.reasons if st is not None else ():
            if reason.startswith(PREFIX):
                left -= 1
            else:
                reasons[reason] += 1
        if left <= 0:
            continue
        for reason, n in reasons.items():
            by_node[reason] += left * n
    if total["owner"] <= 0 and not data.has_affinity:
        return []
    out = []
    for key, text in (
        ("name", "exactly matches the requested reservation name"),
        ("name_unmatched", "didn't match the requested reservation name"),
        ("affinity", "didn't match affinity rules"),
        ("unschedulable", "is unschedulable"),
        ("exact", "is not exact matched"),
    ):
        if total[key] > 0:
            out.append(f"{total[key]} {PREFIX}{text}")
    out.extend(f"{n} {PREFIX}had untolerated taint {key}" for key, n in sorted(taints.items()))
    out.extend(f"{n} {PREFIX}for node reason that {reason}" for reason, n in sorted(by_node.items()))
    out.append(f"{total['owner']} {PREFIX}matched owner total")
    return out
