"""The order LowNodeLoad evicts in (Koordinator's ``utils/sorter``).

Pods, first evicted first: koord priority class (free < batch < mid < prod < none), ``spec.priority``,
Kubernetes QoS (BestEffort < Burstable < Guaranteed), koord QoS (BE < LS < LSR < LSE = SYSTEM < none),
``controller.kubernetes.io/pod-deletion-cost``, ``scheduling.koordinator.sh/eviction-cost``, then
**usage fit, best first** (pods without a reported usage last), then the newest first. Usage fit looks
at the resources over their threshold only: with ``excess = usage - threshold`` and
``ratio = pod usage / excess``, a resource scores ``ratio`` below 1 and ``1/ratio + 1`` from 1 up, so the
pod that just covers the excess scores highest (2); the weighted mean over those resources is the score.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from koord.descheduler.framework.interface import Obj
from koord.descheduler.plugins.lownodeload.usage import NodeUsage
from koordshared.apis.core import pod as podutil
from koordshared.apis.core.pod import kube_qos_of, str_map
from koordshared.apis.extension import qos as extension
from koordshared.apis.extension.qos import priority_class_of, qos_of

PRIORITY_ORDER = {
    extension.PriorityClass.FREE: 1,
    extension.PriorityClass.BATCH: 2,
    extension.PriorityClass.MID: 3,
    extension.PriorityClass.PROD: 4,
    extension.PriorityClass.NONE: 5,
}
KUBE_QOS_ORDER = {
    podutil.KubeQOSClass.BESTEFFORT: 1,
    podutil.KubeQOSClass.BURSTABLE: 2,
    podutil.KubeQOSClass.GUARANTEED: 3,
}
QOS_ORDER = {
    extension.QOSClass.BE: 1,
    extension.QOSClass.LS: 2,
    extension.QOSClass.LSR: 3,
    extension.QOSClass.LSE: 4,
    extension.QOSClass.SYSTEM: 4,
    extension.QOSClass.NONE: 5,
}


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What ordering and prod classification read of a pod, computed once per pod object."""

    key: str
    priority_class: extension.PriorityClass
    rank: tuple[int, int, int, int, int, int]
    """Priority class, priority, k8s QoS, koord QoS, deletion cost, eviction cost (ascending)."""
    created: float


def pod_facts(pod: Obj) -> PodFacts:
    labels = str_map(podutil.meta(pod).get("labels") or {})
    kube_qos = kube_qos_of(pod)
    qos = qos_of(labels, kube_qos)
    spec_priority = podutil.priority(pod) if podutil.has_priority(pod) else None
    pclass = priority_class_of(labels, spec_priority, qos)
    return PodFacts(
        key=podutil.pod_key(pod),
        priority_class=pclass,
        rank=(
            PRIORITY_ORDER[pclass],
            podutil.priority(pod),
            KUBE_QOS_ORDER[kube_qos],
            QOS_ORDER[qos],
            podutil.deletion_cost(pod),
            podutil.eviction_cost(pod),
        ),
        created=podutil.creation_time(pod),
    )


def _fit(used: int, excess: int) -> float:
    """``mostRequestedScorePod``."""
    if excess == 0:
        return 0.0
    ratio = used / excess
    return 1 / ratio + 1 if ratio >= 1 else ratio


def usage_fit(metric: tuple[int, int], excess: Mapping[str, int], weights: Mapping[str, int]) -> float:
    """The usage-fit score of a pod reporting ``metric`` (cpu, memory) against the node's ``excess``."""
    total = 0.0
    weight_sum = 0
    for r, used in (("cpu", metric[0]), ("memory", metric[1])):
        w = weights.get(r, 0)
        total += _fit(used, excess.get(r, 0)) * w
        weight_sum += w
    return total / weight_sum if weight_sum else 0.0


def sort_pods(
    pods: list[Obj],
    facts: Mapping[str, PodFacts],
    node: NodeUsage,
    weights: Mapping[str, int],
    prod: bool,
) -> None:
    """Sort ``pods`` (of ``node``) in eviction order, in place; ``facts`` by pod key."""
    usage, high = node.view(prod)
    excess = {r: usage[r] - high[r] for r in high if r in usage and usage[r] > high[r]}
    over_weights = {r: weights.get(r, 0) for r in excess}

    def key(pod: Obj) -> tuple[object, ...]:
        f = facts[podutil.pod_key(pod)]
        metric = node.pod_metrics.get(f.key)
        fit = (0, -usage_fit(metric, excess, over_weights)) if metric is not None else (1, 0.0)
        return (*f.rank, *fit, -f.created)

    pods.sort(key=key)


def node_score(used: Mapping[str, int], capacity: Mapping[str, int], weights: Mapping[str, int]) -> int:
    """``ResourceUsageScorer`` with ``mostRequestedScore``."""
    total = weight_sum = 0
    for r, u in used.items():
        cap = capacity.get(r, 0)
        score = min(u, cap) * 1000 // cap if cap else 0
        w = weights.get(r, 0)
        total += score * w
        weight_sum += w
    return total // weight_sum if weight_sum else 0


def sort_nodes(nodes: Sequence[NodeUsage], weights: Mapping[str, int], prod: bool) -> list[NodeUsage]:
    """Source nodes, hottest first (by the prod usage in the prod view)."""
    return sorted(nodes, key=lambda n: -node_score(n.view(prod)[0], n.capacity, weights))
