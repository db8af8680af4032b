"""Preemption inside a quota (Koordinator's ``elasticquota/preempt.go``): ElasticQuota's PostFilter runs
DefaultPreemption's evaluator (candidates, PodDisruptionBudgets, the pick, victims deleted beside the loop)
with its own choice of victims, as Koordinator runs kube-scheduler's evaluator with its own
``SelectVictimsOnNode``: Details: ``docs/modules.md``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from koord.scheduler.framework import (
    Code,
    CycleState,
    NodeInfo,
    Obj,
    PodInfo,
    PostFilterResult,
    SchedulerHandle,
    Status,
)
from koord.scheduler.framework.filterresult import fit_message
from koord.scheduler.framework.types import Resources
from koord.scheduler.plugins.defaultpreemption import DefaultPreemption
from koord.scheduler.plugins.defaultpreemption.victims import NONE_HERE
from koord.scheduler.plugins.elasticquota.args import ElasticQuotaArgs
from koord.scheduler.plugins.elasticquota.ledger import Ledger
from koord.scheduler.plugins.elasticquota.revoke import fits
from koordshared.apis.core.pod import priority
from koordshared.apis.extension import elasticquota as eq

STATE_KEY = "PostFilterElasticQuota"
"""Where PreFilter leaves the pod's :class:`QuotaCycle` (Koordinator's ``postFilterKey``)."""


def plus(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    return {r: a.get(r, 0) + b.get(r, 0) for r in {*a, *b}}


@dataclass(slots=True)
class QuotaCycle:
    """What PreFilter learnt of the pod's quota, for the preemption what-ifs (Koordinator's
    ``PostFilterState``): ``used`` changes as pods of the quota are removed and added back."""

    quota: str
    used: Resources
    non_preemptible_used: Resources
    limit: Resources
    request: Resources
    """The pod's requests masked to the quota's max."""
    max_names: frozenset[str] = field(default_factory=frozenset)

    def clone(self) -> QuotaCycle:
        return QuotaCycle(
            self.quota,
            dict(self.used),
            dict(self.non_preemptible_used),
            self.limit,
            self.request,
            self.max_names,
        )

    def fits(self) -> bool:
        """Whether the pod fits the quota with ``used`` as it is now."""
        return fits(plus(self.used, self.request), self.limit)


class QuotaVictims:
    """The :class:`~koord.scheduler.plugins.defaultpreemption.policy.VictimPolicy` of quota preemption."""

    def __init__(self, ledger: Ledger, args: ElasticQuotaArgs) -> None:
        self._ledger = ledger
        self._spare_default = args.disable_default_quota_preemption

    def can_preempt(self, preemptor: PodInfo, victim: PodInfo) -> bool:
        """Koordinator's ``canPreempt``."""
        if victim.priority >= preemptor.priority or eq.is_non_preemptible(victim.pod):
            return False
        quota = self._ledger.quota_of(victim.pod)
        if self._spare_default and quota == eq.DEFAULT_QUOTA:
            return False
        return quota == self._ledger.quota_of(preemptor.pod)

    def nodes(self, preemptor: PodInfo, potential: Sequence[NodeInfo]) -> Sequence[NodeInfo]:
        """The nodes where the preemptor's quota has pods it may preempt (the quota knows them; the dry run
        need not visit the cluster)."""
        holding = self._holding(preemptor)
        return [ni for ni in potential if ni.name in holding]

    def has_victims(self, preemptor: PodInfo) -> bool:
        """Whether a pod preemptor is eligible to be its victim (unless it is not eligible at all, which
        the evaluator then says)."""
        return preemptor.spec.get("preemptionPolicy") == "Never" or bool(self._holding(preemptor))

    def _holding(self, preemptor: PodInfo) -> set[str]:
        quota = self._ledger.quota_of(preemptor.pod)
        if self._spare_default and quota == eq.DEFAULT_QUOTA:
            return set()
        return {
            node
            for pod, node in self._ledger.placed(quota)
            if priority(pod) < preemptor.priority and not eq.is_non_preemptible(pod)
        }

    def fits(self, state: CycleState, pod: Obj) -> Status | None:
        cycle = state.get(STATE_KEY)
        if not isinstance(cycle, QuotaCycle) or cycle.fits():
            return None
        return Status.unschedulable(f"Insufficient quotas, quotaName: {cycle.quota}")

    def candidates(self, potential: int, rng: random.Random) -> tuple[int, int]:
        return 0, potential


class QuotaPreemption:
    """ElasticQuota's PostFilter."""

    def __init__(
        self, plugin_name: str, handle: SchedulerHandle, ledger: Ledger, args: ElasticQuotaArgs
    ) -> None:
        self._policy = QuotaVictims(ledger, args)
        self._evaluator = DefaultPreemption(None, handle, name=plugin_name, policy=self._policy)
        self._plugin = plugin_name
        self._handle = handle

    def post_filter(
        self, state: CycleState, pod: Obj, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        refused = self._refused_by_quota(statuses)
        if refused is Code.UNSCHEDULABLE and not self._policy.has_victims(PodInfo(pod)):
            # Nothing in the quota to preempt: the evaluator's answer, without visiting every node.
            self._handle.count_preemption_attempt()
            message = fit_message(len(self._handle.node_infos()), {}, absent=NONE_HERE)
            return PostFilterResult(""), Status.unresolvable(f"preemption: {message}")
        result, st = self._evaluator.post_filter(state, pod, statuses)
        if st is not None and st.code is Code.UNSCHEDULABLE and refused is not None:
            st = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, st.reasons)
        return result, st

    def _refused_by_quota(self, statuses: Mapping[str, Status]) -> Code | None:
        """How ElasticQuota refused the pod (its PreFilter's answer is every node's), ``None`` when it
        did not."""
        return next((st.code for st in statuses.values() if st.plugin == self._plugin), None)
