"""Victim choice and the eviction loop shared by ``BECPUEvict`` and ``BEMemoryEvict`` (Koordinator's
``pkg/koordlet/qosmanager/plugins/util/evictor.go`` and ``evict.go``).

Only BE pods are ever candidates, and not every BE pod: inactive pods, static/mirror pods and DaemonSet
pods are never chosen (evicting them frees nothing for long: they come straight back), nor pods whose
``koordinator.sh/eviction-policy`` annotation does not list the strategy. The loop walks the sorted
victims, counts pods already evicted recently as released, and stops as soon as the release target is met.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from koordlet import api
from qosplugins import _shared

EVICTION_POLICY_ANNOTATION = "koordinator.sh/eviction-policy"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


class EvictionGate:
    """The checks every eviction round starts with: cool-down over, NodeSLO switch on, the strategy's
    settings present (a missing one is warned about once per distinct reason, and nothing is evicted)."""

    def __init__(
        self,
        name: str,
        cool_time: api.Flag[float],
        last_evict: float,
        unconfigured: Callable[[api.ResourceThresholdStrategy], str] = lambda _slo: "",
    ) -> None:
        self.name = name
        self.cool_time = cool_time
        self.unconfigured = unconfigured
        self.last_evict = last_evict
        self._warned = ""

    def open(self, ctx: api.PluginContext) -> api.ResourceThresholdStrategy | None:
        """The strategy to act on now, or ``None`` when this round must not evict."""
        if ctx.clock() - self.last_evict < ctx.option(self.cool_time):
            return None
        slo = ctx.states.node_slo().resource_used_threshold_with_be
        if not slo.enable:
            return None
        reason = self.unconfigured(slo)
        if reason:
            if reason != self._warned:
                ctx.logger.warning("%s: NodeSLO lacks settings, not evicting: %s", self.name, reason)
                self._warned = reason
            return None
        self._warned = ""
        return slo


@dataclass(frozen=True, slots=True)
class Victim:
    """A candidate with its sort weight (``used``) and what evicting it releases (``contribution``)."""

    pod: api.PodInfo
    used: float
    contribution: float


def evictable(pod: api.PodInfo, gate: str) -> bool:
    """Whether strategy ``gate`` may evict ``pod`` at all: Koordinator's BE strategies take only pods
    *labelled* BE (an unlabelled BestEffort pod is left alone, as there)."""
    if not pod.is_labelled_best_effort or not pod.is_active:
        return False
    if pod.owner_kind in api.NEVER_EVICTED_OWNERS or MIRROR_ANNOTATION in pod.annotations:
        return False
    policy = pod.annotations.get(EVICTION_POLICY_ANNOTATION)
    if policy is None:
        return True
    try:
        allowed = json.loads(policy)
    except ValueError:
        # An annotation we cannot read is not a permission: leave the pod alone.
        return False
    return isinstance(allowed, list) and gate in allowed


def _compare(a: Victim, b: Victim) -> int:
    pa, pb = a.pod.priority, b.pod.priority
    if pa is not None and pb is not None and pa != pb:
        return -1 if pa < pb else 1
    if a.used != b.used:
        return -1 if a.used > b.used else 1
    if a.pod.name != b.pod.name:
        return -1 if a.pod.name > b.pod.name else 1
    return 0


def sort_victims(victims: Sequence[Victim]) -> list[Victim]:
    """Koordlet's BE order: lower ``spec.priority`` first when both are set and differ, then larger
    usage first (so pods using nothing come last), then name descending."""
    return sorted(victims, key=functools.cmp_to_key(_compare))


@dataclass(frozen=True, slots=True)
class EvictionRound:
    released: float
    evicted: tuple[api.PodInfo, ...]
    """Pods evicted now (not counting recently evicted ones that were only credited)."""


def evict_until(
    ctx: api.PluginContext, gate: str, victims: Sequence[Victim], to_release: float, unit: str
) -> EvictionRound:
    """Evict ``victims`` in order until their contributions reach ``to_release``."""
    reason = _shared.evict_reason(gate)
    released = 0.0
    evicted: list[api.PodInfo] = []
    for victim in victims:
        if released >= to_release:
            break
        pod = victim.pod
        if ctx.evictor.recently_evicted(pod.uid):
            released += victim.contribution
            continue
        ctx.logger.info(
            "%s: evicting %s/%s (releases %.0f%s of %.0f%s)%s",
            gate,
            pod.namespace,
            pod.name,
            victim.contribution,
            unit,
            to_release - released,
            unit,
            " [dry-run]" if ctx.dry_run else "",
        )
        if ctx.evictor.evict(pod, _shared.EVICTED, f"{reason}, kill pod: {pod.name}"):
            released += victim.contribution
            evicted.append(pod)
    return EvictionRound(released=released, evicted=tuple(evicted))
