"""One eviction round of several tasks, and the BE victim order (Koordinator's
``pkg/koordlet/qosmanager/plugins/util/evict.go``: ``KillAndEvictPods``, ``EvictTaskInfo``).
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from koordlet import api
from qosplugins import _shared

EVICTION_POLICY_ANNOTATION = "koordinator.sh/eviction-policy"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
BY_REQUEST = "podResourceRequest"
"""Release target: what the evicted pods requested (``ReleaseTargetTypeResourceRequest``)."""
BY_USAGE = "podUsed"
"""Release target: what the evicted pods were using (``ReleaseTargetTypeResourceUsed``)."""


class Cooling:
    """The cool-down one evictor's tasks share (Koordinator's ``lastEvictTime``), and the NodeSLO checks
    every round starts with: the switch on, each task's settings present (a missing one is warned about
    once per distinct reason, and that task is left out)."""

    def __init__(self, name: str, cool_time: api.Flag[float], last_evict: float) -> None:
        self.name = name
        self.cool_time = cool_time
        self.last_evict = last_evict
        self._warned: dict[str, str] = {}

    def open(self, ctx: api.PluginContext) -> api.ResourceThresholdStrategy | None:
        """The strategy to act on now, or ``None`` while cooling or with the switch off."""
        if ctx.clock() - self.last_evict < ctx.option(self.cool_time):
            return None
        slo = ctx.states.node_slo().resource_used_threshold_with_be
        return slo if slo.enable else None

    def configured(self, ctx: api.PluginContext, gate: str, missing: str) -> bool:
        """Whether ``gate``'s task may run; ``missing`` says what its settings lack (empty: nothing)."""
        if missing:
            if self._warned.get(gate) != missing:
                ctx.logger.warning("%s: NodeSLO lacks settings, not evicting: %s", gate, missing)
                self._warned[gate] = missing
            return False
        self._warned.pop(gate, None)
        return True


def gates_on(ctx: api.PluginContext, own: str, order: Sequence[str]) -> list[str]:
    """The gates of ``order`` that are on: from ``ctx.agent.feature_gates``, where the plugin's own gate
    counts as on when the agent did not say (a harness that starts the plugin)."""
    gates = ctx.agent.feature_gates
    return [g for g in order if gates.get(g, g == own and own not in gates)]


@dataclass(frozen=True, slots=True)
class EvictTask:
    """One gate's part of a round (Koordinator's ``EvictTaskInfo``)."""

    gate: str
    target: str
    """:data:`BY_REQUEST` or :data:`BY_USAGE`."""
    to_release: Mapping[str, float]
    """Resource name -> amount (millicores for CPU resources, bytes for memory ones)."""
    victims: Sequence[api.PodInfo]
    """In eviction order."""
    releases: Callable[[api.PodInfo], Mapping[str, float]]
    """What evicting a pod releases toward this task (any pod, also one another task picks)."""


def evict_round(ctx: api.PluginContext, tasks: Sequence[EvictTask]) -> bool:
    """Run ``tasks`` in order as one round (module doc); whether a pod was evicted now."""
    tasks = [t for t in tasks if any(v > 0 for v in t.to_release.values())]
    released: dict[str, dict[str, float]] = {}
    taken: set[str] = set()
    evicted_now = False

    def credit(pod: api.PodInfo) -> None:
        taken.add(pod.uid)
        per_target: dict[str, dict[str, float]] = {}
        for t in tasks:
            into = per_target.setdefault(t.target, {})
            for name, value in t.releases(pod).items():
                into[name] = max(into.get(name, 0.0), value)
        for target, values in per_target.items():
            got = released.setdefault(target, {})
            for name, value in values.items():
                got[name] = got.get(name, 0.0) + value

    for task in tasks:
        reason = _shared.evict_reason(task.gate)
        for pod in task.victims:
            if not outstanding(task, released):
                break
            if pod.uid in taken:
                continue
            if ctx.evictor.recently_evicted(pod.uid):
                credit(pod)  # still terminating: count it rather than pick another victim
                continue
            if not set(task.releases(pod)) & set(outstanding(task, released)):
                continue  # it holds none of the resources the task still needs (module doc)
            ctx.logger.info(
                "%s: evicting %s/%s (releases %s of %s)%s",
                task.gate,
                pod.namespace,
                pod.name,
                _amounts(task.releases(pod)),
                _amounts(outstanding(task, released)),
                " [dry-run]" if ctx.dry_run else "",
            )
            if ctx.evictor.evict(pod, _shared.EVICTED, f"{reason}, kill pod: {pod.name}"):
                evicted_now = True
                credit(pod)
    for task in tasks:
        left = outstanding(task, released)
        if left:
            ctx.logger.warning("%s: %s still to release: no victim left", task.gate, _amounts(left))
    return evicted_now


def outstanding(task: EvictTask, released: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """What ``task`` still has to release, given what its target released so far."""
    got = released.get(task.target, {})
    return {n: v - got.get(n, 0.0) for n, v in task.to_release.items() if v - got.get(n, 0.0) > 0}


def _amounts(values: Mapping[str, float]) -> str:
    return ", ".join(f"{name} {value:.0f}" for name, value in sorted(values.items())) or "nothing"


def policy_allows(pod: api.PodInfo, gate: str) -> bool:
    """Koordinator's ``IsEvictionPolicyAllowed``: no ``koordinator.sh/eviction-policy`` annotation, or
    one that lists ``gate``; an annotation we cannot read is not a permission."""
    policy = pod.annotations.get(EVICTION_POLICY_ANNOTATION)
    if policy is None:
        return True
    try:
        allowed = json.loads(policy)
    except ValueError:
        return False
    return isinstance(allowed, list) and gate in allowed


def never_evicted(pod: api.PodInfo) -> bool:
    """Static (mirror) and DaemonSet pods: evicting them frees nothing for long; inactive pods neither."""
    return (
        not pod.is_active
        or pod.owner_kind in api.NEVER_EVICTED_OWNERS
        or MIRROR_ANNOTATION in pod.annotations
    )


def evictable(pod: api.PodInfo, gate: str) -> bool:
    """Whether BE strategy ``gate`` may evict ``pod`` at all: Koordinator's BE strategies take only pods
    *labelled* BE (an unlabelled BestEffort pod is left alone, as there)."""
    return pod.is_labelled_best_effort and not never_evicted(pod) and policy_allows(pod, gate)


@dataclass(frozen=True, slots=True)
class Victim:
    """A BE candidate with its sort weight (``used``)."""

    pod: api.PodInfo
    used: float


def _compare(a: Victim, b: Victim) -> int:
    pa, pb = a.pod.priority, b.pod.priority
    if pa is not None and pb is not None and pa != pb:
        return -1 if pa < pb else 1
    if a.used != b.used:
        return -1 if a.used > b.used else 1
    if a.pod.name != b.pod.name:
        return -1 if a.pod.name > b.pod.name else 1
    return 0


def sort_victims(victims: Sequence[Victim]) -> list[api.PodInfo]:
    """Koordlet's BE order: lower ``spec.priority`` first when both are set and differ, then larger
    usage first (so pods using nothing come last), then name descending."""
    return [v.pod for v in sorted(victims, key=functools.cmp_to_key(_compare))]
