"""``ElasticQuota``: admit a pod only while its quota has room (Koordinator's ``elasticquota/plugin.go``).

PreFilter: with the pod, its quota's used must stay within its runtime (its max without runtime quota) in
every resource, a non-preemptible pod's within the quota's min, ancestors checked too when asked; the
rejection is ``Unschedulable`` in Koordinator's words, so preemption may help. Reserve counts the pod as
used, Unreserve gives it back. Details: ``docs/modules.md``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koord.scheduler.framework import (
    QUEUE,
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    NodeInfo,
    Obj,
    PodInfo,
    PostFilterResult,
    QueueingHint,
    SchedulerHandle,
    Status,
)
from koord.scheduler.framework.extension import Controller
from koord.scheduler.framework.types import Resources
from koord.scheduler.plugins.elasticquota.args import ElasticQuotaArgs, parse_args
from koord.scheduler.plugins.elasticquota.ledger import Ledger
from koord.scheduler.plugins.elasticquota.preempt import STATE_KEY, QuotaCycle, QuotaPreemption, plus
from koord.scheduler.plugins.elasticquota.quotas import QuotaSpec
from koord.scheduler.plugins.elasticquota.revoke import RevokeController
from koord.scheduler.plugins.elasticquota.status import StatusController
from koord.scheduler.plugins.elasticquota.units import go_list, printed
from koordshared.apis.extension import elasticquota as eq
from koordshared.apis.meta.groups import ELASTIC_QUOTAS

NAME = "ElasticQuota"
QUOTA_CACHE = "elasticquotas"


@dataclass(frozen=True, slots=True)
class _Handler:
    """An informer event handler (the informer reads these three attributes)."""

    on_add: Any = None
    on_update: Any = None
    on_delete: Any = None


def exceeded(used: Mapping[str, int], limit: Mapping[str, int]) -> list[str]:
    return sorted(r for r, v in limit.items() if r in used and used[r] > v)


class ElasticQuota:
    """The plugin; ``ElasticQuota(args, handle)`` is its factory."""

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        if not callable(getattr(handle, "patch_object", None)):
            raise ValueError("ElasticQuota needs koord-scheduler's handle (it is a koord-scheduler plugin)")
        self.args: ElasticQuotaArgs = parse_args(args)
        self.handle: SchedulerHandle = handle
        self.ledger = Ledger(self.args)
        ledger = self.ledger
        self.quotas = handle.watch(QUOTA_CACHE, ELASTIC_QUOTAS)
        self.quotas.add_handler(
            _Handler(ledger.set_quota, lambda _o, n: ledger.set_quota(n), ledger.delete_quota)
        )
        nodes = handle.store("nodes")
        if nodes is not None:
            nodes.add_handler(_Handler(ledger.set_node, lambda _o, n: ledger.set_node(n), ledger.delete_node))
        handle.on_pods(ledger.add_pod, ledger.update_pod, ledger.delete_pod)
        # A binding given up: the pod stays pending in its quota's request, no longer used.
        handle.register_forget_pod_handler(ledger.unreserve)
        self.preemption = QuotaPreemption(NAME, handle, ledger, self.args)

    def new_controllers(self) -> Sequence[Controller]:
        out: list[Controller] = [
            StatusController(self.ledger, self.quotas, self.handle, self.args.quota_group_namespace)
        ]
        if self.args.monitor_all_quotas and self.args.enable_runtime_quota:
            out.append(RevokeController(self.ledger, self.handle, self.args))
        return out

    # ---- PreFilter --------------------------------------------------------------------------------

    def limit(self, quota: str) -> Resources | None:
        """What the quota's used is checked against: its runtime, or its max without runtime quotas."""
        spec = self.ledger.spec(quota)
        if spec is None:
            return None
        if not self.args.enable_runtime_quota:
            return dict(spec.max)
        return self.ledger.runtime(quota)

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        quota = self.ledger.quota_of(pod)
        spec = self.ledger.spec(quota)
        if spec is None:  # its quota was deleted since it was matched
            return Status.error(f"could not find the ElasticQuota {quota}")
        if spec.is_parent:
            return Status.unresolvable(
                f"quota {quota} is a parent quota ({eq.LABEL_IS_PARENT}: true): pods run in leaf quotas only"
            )
        limit = self.limit(quota)
        if limit is None:
            chain = [quota, *self.ledger.parents(quota)]
            return Status.unresolvable(
                f"quota {quota} is not in the quota tree: its parents {go_list(chain)} "
                f"never reach {eq.ROOT_QUOTA}"
            )
        info = state.pod_info if state.pod_info is not None else PodInfo(pod)
        request = spec.mask(info.requests)
        used, np_used = self.ledger.own_used(quota)
        cycle = QuotaCycle(quota, used, np_used, limit, request, frozenset(spec.max))
        state.write(STATE_KEY, cycle)
        over = exceeded(plus(used, request), limit)
        if over:
            return Status.unschedulable(
                f"Insufficient quotas, quotaName: {quota}, runtime: {printed(limit)}, used: {printed(used)}, "
                f"pod's request: {printed(request)}, exceedDimensions: {go_list(over)}"
            )
        if eq.is_non_preemptible(pod):
            over = exceeded(plus(np_used, request), spec.min)
            if over:
                return Status.unschedulable(
                    f"Insufficient non-preemptible quotas, quotaName: {quota}, min: {printed(spec.min)}, "
                    f"nonPreemptibleUsed: {printed(np_used)}, pod's request: {printed(request)}, "
                    f"exceedDimensions: {go_list(over)}"
                )
        if self.args.enable_check_parent_quota:
            return self._check_parents(quota, request)
        return None

    def _check_parents(self, quota: str, request: Resources) -> Status | None:
        """Koordinator's ``checkQuotaRecursive``: each ancestor's used plus the pod within its limit."""
        path = [quota]
        for parent in self.ledger.parents(quota):
            path.insert(0, parent)
            limit = self.limit(parent) or {}
            used = self.ledger.usage(parent).used
            with_pod = {r: used.get(r, 0) + v for r, v in request.items()}
            over = exceeded(with_pod, limit)
            if over:
                return Status.unschedulable(
                    f"Insufficient quotas, quotaNameTopo: {go_list(path)}, runtime: {printed(limit)}, "
                    f"used: {printed(used)}, pod's request: {printed(request)}, "
                    f"exceedDimensions: {go_list(over)}"
                )
        return None

    def add_pod(self, state: CycleState, pod: Obj, to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        cycle = state.get(STATE_KEY)
        if isinstance(cycle, QuotaCycle) and self.ledger.in_quota(to_add.pod, cycle.quota):
            for r, v in to_add.requests.items():
                if r in cycle.max_names:
                    cycle.used[r] = cycle.used.get(r, 0) + v
        return None

    def remove_pod(
        self, state: CycleState, pod: Obj, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        cycle = state.get(STATE_KEY)
        if isinstance(cycle, QuotaCycle) and self.ledger.in_quota(to_remove.pod, cycle.quota):
            for r, v in to_remove.requests.items():
                if r in cycle.max_names:
                    cycle.used[r] = max(cycle.used.get(r, 0) - v, 0)
        return None

    # ---- PostFilter -----------------------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod: Obj, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        return self.preemption.post_filter(state, pod, statuses)

    # ---- Reserve --------------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        self.ledger.reserve(pod, node_name)
        return None

    def unreserve(self, state: CycleState, pod: Obj, node_name: str) -> None:
        self.ledger.unreserve(pod)

    # ---- requeueing -----------------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        hinted = self.args.enable_queue_hint
        return (
            ClusterEventWithHint(
                ClusterEvent("Pod", Action.DELETE), self._after_pod_deleted if hinted else None
            ),
            ClusterEventWithHint(ClusterEvent(ELASTIC_QUOTAS.kind, Action.ALL), self._after_quota_changed),
            ClusterEventWithHint(ClusterEvent("Node", Action.ADD | Action.UPDATE_NODE_ALLOCATABLE)),
        )

    def _related(self, pod: Obj, quota: str) -> bool:
        """Whether a change of ``quota`` may make room for ``pod``: its own quota, or an ancestor when
        ancestors are checked."""
        own = self.ledger.quota_of(pod)
        if quota == own:
            return True
        return self.args.enable_check_parent_quota and quota in self.ledger.parents(own)

    def _after_pod_deleted(self, pod: Obj, old: Any, _new: Any) -> QueueingHint:
        """Koordinator's ``isSchedulableAfterPodDeletion``: a placed pod of the same quota left."""
        if not isinstance(old, Mapping) or not (old.get("spec") or {}).get("nodeName"):
            return QueueingHint.SKIP
        return QUEUE if self._related(pod, self.ledger.quota_of(old)) else QueueingHint.SKIP

    def _after_quota_changed(self, pod: Obj, old: Any, new: Any) -> QueueingHint:
        """An update that leaves the quota's spec, labels and read annotations as they were (the figures
        this plugin writes back every second) makes room for nobody; with ``enableQueueHint``, the rest
        is Koordinator's ``isSchedulableAfterQuotaChanged`` (for added and deleted quotas too)."""
        if isinstance(old, Mapping) and isinstance(new, Mapping) and QuotaSpec.of(old) == QuotaSpec.of(new):
            return QueueingHint.SKIP
        if not self.args.enable_queue_hint:
            return QUEUE
        changed = new if isinstance(new, Mapping) else old
        if not isinstance(changed, Mapping):
            return QUEUE
        name = str((changed.get("metadata") or {}).get("name") or "")
        return QUEUE if self._related(pod, name) else QueueingHint.SKIP
