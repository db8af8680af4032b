"""The fewest pods to remove from one node so that the preemptor fits there (kube-scheduler's
``SelectVictimsOnNode``), and PodDisruptionBudgets.

Every pod of lower priority (every pod the plugin's :class:`~.policy.VictimPolicy` lets it preempt) is
taken off a copy of the node (each PreFilter plugin told through its ``remove_pod``); if the preemptor
still does not fit (the profile's filters, and the policy's own check), the node cannot help. Otherwise
the pods are put back one at a time, most important first (higher priority, then the one running
longer), those whose removal would violate a PodDisruptionBudget before the others; a pod that leaves the
preemptor without room is taken off again and becomes a victim. The victims come out most important first.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from koord.scheduler.framework import CycleState, NodeInfo, Obj, PodInfo, SchedulerHandle, Status
from koord.scheduler.plugins.defaultpreemption.policy import VictimPolicy
from koordshared.apis.meta.quantity import parse_time
from koordshared.apis.meta.selector import LabelSelector, parse_selector

NO_VICTIMS = "No preemption victims found for incoming pod"
NONE_HERE = Status.unresolvable(NO_VICTIMS)


@dataclass(frozen=True, slots=True)
class Budget:
    """A PodDisruptionBudget as preemption reads it."""

    namespace: str
    selector: LabelSelector
    allowed: int
    disrupted: frozenset[str]

    @classmethod
    def of(cls, pdb: Obj) -> Budget:
        meta, spec, status = pdb.get("metadata") or {}, pdb.get("spec") or {}, pdb.get("status") or {}
        allowed = status.get("disruptionsAllowed")
        return cls(
            str(meta.get("namespace") or ""),
            parse_selector(spec.get("selector")),
            allowed if isinstance(allowed, int) and not isinstance(allowed, bool) else 0,
            frozenset(status.get("disruptedPods") or ()),
        )

    def covers(self, pod: PodInfo) -> bool:
        sel = self.selector
        return (
            pod.namespace == self.namespace
            and bool(sel.requirements)
            and sel.matches(pod.labels)
            and pod.name not in self.disrupted
        )


def budgets(pdbs: Iterable[Obj]) -> list[Budget]:
    return [Budget.of(p) for p in pdbs]


def start_time(pod: PodInfo, now: float) -> float:
    """``status.startTime``; ``now`` for a pod that has not started (assumed or just bound)."""
    started = parse_time((pod.pod.get("status") or {}).get("startTime"))
    return now if started is None else started


def importance(now: float) -> Callable[[PodInfo], tuple[int, float]]:
    """A sort key that puts the more important pod first (kube-scheduler's ``MoreImportantPod``)."""
    return lambda p: (-p.priority, start_time(p, now))


def split_by_budget(pods: list[PodInfo], pdbs: list[Budget]) -> tuple[list[PodInfo], list[PodInfo]]:
    """(pods whose removal violates a budget, the others), each in the given order."""
    left = [b.allowed for b in pdbs]
    violating: list[PodInfo] = []
    fine: list[PodInfo] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i, b in enumerate(pdbs):
                if b.covers(pod):
                    left[i] -= 1
                    violated |= left[i] < 0
        (violating if violated else fine).append(pod)
    return violating, fine


@dataclass(frozen=True, slots=True)
class Victims:
    pods: list[PodInfo]
    """Most important first."""
    pdb_violations: int


def select_victims_on_node(
    handle: SchedulerHandle,
    state: CycleState,
    pod: Obj,
    preemptor: PodInfo,
    node: NodeInfo,
    pdbs: list[Budget],
    now: float,
    policy: VictimPolicy,
) -> tuple[Victims | None, Status | None]:
    """The victims on ``node``, or why there are none (``node`` and ``state`` are left as they are: the
    what-if runs on copies)."""
    potential = [p for p in node.pods.values() if policy.can_preempt(preemptor, p)]
    if not potential:
        return None, NONE_HERE
    node, state = node.clone(), state.clone()
    for p in potential:
        node.remove_pod(p.uid)
        failed = handle.run_pre_filter_extension_remove_pod(state, pod, p, node)
        if failed is not None:
            return None, failed
    st = handle.run_filter_plugins_with_nominated_pods(state, pod, node) or policy.fits(state, pod)
    if st is not None:
        return None, st
    key = importance(now)
    potential.sort(key=key)
    violating, fine = split_by_budget(potential, pdbs)
    victims: list[PodInfo] = []

    def reprieve(p: PodInfo) -> Status | None:
        """Put ``p`` back; a victim (taken off again) when the preemptor no longer fits."""
        node.add_pod(p)
        failed = handle.run_pre_filter_extension_add_pod(state, pod, p, node)
        if failed is not None:
            return failed
        fails = handle.run_filter_plugins_with_nominated_pods(state, pod, node) or policy.fits(state, pod)
        if fails is not None:
            node.remove_pod(p.uid)
            victims.append(p)
            return handle.run_pre_filter_extension_remove_pod(state, pod, p, node)
        return None

    violations = 0
    for group in (violating, fine):
        for p in group:
            before = len(victims)
            failed = reprieve(p)
            if failed is not None:
                return None, failed
            if group is violating and len(victims) > before:
                violations += 1
    if violating and fine:
        victims.sort(key=key)
    return Victims(victims, violations), None
