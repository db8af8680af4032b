"""The over-use revoke (Koordinator's ``QuotaOverUsedRevokeController``), off unless ``monitorAllQuotas``
(and ``enableRuntimeQuota``): a quota whose used has stayed above its runtime for longer than
``delayEvictTime`` gives pods back until it fits, checked every ``revokePodInterval``.

Which pods (``getToRevokePodList``): the quota's placed pods from the least important up (lower
priority, then the later started), never a non-preemptible one, are taken off until used fits the
runtime; then, from the most important of those down, each one that fits again is kept. The rest are
evicted (``policy/v1`` Eviction, so PodDisruptionBudgets apply). The root, system and default quotas are
never revoked. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from koord.scheduler.framework import Obj, PodInfo, SchedulerHandle
from koord.scheduler.framework.types import Resources
from koord.scheduler.plugins.elasticquota.args import ElasticQuotaArgs
from koord.scheduler.plugins.elasticquota.ledger import Ledger
from koordshared.apis.core.pod import pod_key
from koordshared.apis.extension import elasticquota as eq
from koordshared.apis.meta.quantity import parse_time

log = logging.getLogger(__name__)

CONTROLLER = "QuotaOverUsedRevokeController"
NEVER_REVOKED = frozenset({eq.ROOT_QUOTA, eq.SYSTEM_QUOTA, eq.DEFAULT_QUOTA})


def fits(used: Mapping[str, int], limit: Mapping[str, int]) -> bool:
    """``quotav1.LessThanOrEqual``: every resource of ``limit`` that ``used`` names is within it."""
    return all(used[r] <= v for r, v in limit.items() if r in used)


def least_important_first(pod: PodInfo) -> tuple[int, float]:
    """kube's ``MoreImportantPod`` reversed: lower priority first, then the later started."""
    started = parse_time((pod.pod.get("status") or {}).get("startTime"))
    return (pod.priority, -(started if started is not None else float("inf")))


def to_revoke(
    pods: list[Obj], used: Resources, runtime: Mapping[str, int], mask: Callable[..., Resources]
) -> list[Obj]:
    """The pods to evict so that ``used`` fits ``runtime`` (see the module docstring)."""
    infos = sorted((PodInfo(p) for p in pods), key=least_important_first)
    used = dict(used)
    taken: list[PodInfo] = []
    for p in infos:
        if fits(used, runtime):
            break
        if eq.is_non_preemptible(p.pod):
            continue
        for r, v in mask(p.requests).items():
            used[r] = used.get(r, 0) - v
        taken.append(p)
    if not fits(used, runtime):
        return [p.pod for p in taken]
    out: list[Obj] = []
    for p in reversed(taken):
        req = mask(p.requests)
        back = {r: used.get(r, 0) + req.get(r, 0) for r in {*used, *req}}
        if fits(back, runtime):
            used = back
        else:
            out.append(p.pod)
    return out


class RevokeController:
    """Evicts what over-used quotas hold beyond their runtime for too long."""

    name = CONTROLLER

    def __init__(self, ledger: Ledger, handle: SchedulerHandle, args: ElasticQuotaArgs) -> None:
        self._ledger = ledger
        self._handle = handle
        self._delay = args.delay_evict_time
        self.period = args.revoke_pod_interval
        self._under_since: dict[str, float] = {}
        """Per quota, the last time its used fitted its runtime."""

    def sync(self) -> None:
        now = self._handle.now()
        names = [n for n in self._ledger.names() if n not in NEVER_REVOKED]
        self._under_since = {n: self._under_since.get(n, now) for n in names}
        for name in names:
            for pod in self.check(name, now):
                failed = self._handle.evict_pod(pod)
                what = pod_key(pod)
                if failed is not None:
                    log.warning("revoking %s from over-used quota %s: %s", what, name, failed.message)
                else:
                    log.info(
                        "revoked %s: quota %s used more than its runtime for %.0fs", what, name, self._delay
                    )

    def check(self, name: str, now: float) -> list[Obj]:
        """The pods to revoke from ``name`` now (none unless it has been over-used for too long)."""
        runtime = self._ledger.runtime(name)
        spec = self._ledger.spec(name)
        if runtime is None or spec is None:
            return []
        used = self._ledger.usage(name).used
        if fits(used, runtime):
            self._under_since[name] = now
            return []
        if now - self._under_since.get(name, now) <= self._delay:
            return []
        self._under_since[name] = now
        return to_revoke([p for p, _ in self._ledger.placed(name)], used, runtime, spec.mask)
