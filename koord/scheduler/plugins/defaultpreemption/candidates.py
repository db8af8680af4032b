"""Which node to preempt on (kube-scheduler's ``DryRunPreemption`` and ``pickOneNodeForPreemption``).

The dry run visits the nodes preemption could help (their filter status was ``Unschedulable``) from a
random offset, wrapping around, and selects the victims on each; it stops once it has at least one
candidate that violates no PodDisruptionBudget and as many candidates as the args ask. Candidates that
violate no budget come first. Of the candidates, the one picked has, in this order of precedence: the
fewest budget violations, the lowest priority among its most important victims, the smallest sum of
victim priorities, the fewest victims, the latest start among its most important victims; then the
first one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from koord.scheduler.framework import Code, CycleState, NodeInfo, Obj, PodInfo, SchedulerHandle, Status
from koord.scheduler.plugins.defaultpreemption.policy import VictimPolicy
from koord.scheduler.plugins.defaultpreemption.victims import (
    Budget,
    Victims,
    select_victims_on_node,
    start_time,
)

_PRIORITY_SHIFT = 2**31
"""Added to each priority before summing, so that no sum of negative priorities beats a smaller one."""


@dataclass(frozen=True, slots=True)
class Candidate:
    node: str
    victims: Victims


@dataclass(slots=True)
class DryRun:
    candidates: list[Candidate]
    statuses: dict[str, Status]
    """Why each node visited yielded no candidate."""
    errors: list[str]


def dry_run(
    handle: SchedulerHandle,
    state: CycleState,
    pod: Obj,
    preemptor: PodInfo,
    potential: Sequence[NodeInfo],
    pdbs: list[Budget],
    offset: int,
    wanted: int,
    now: float,
    policy: VictimPolicy,
) -> DryRun:
    fine: list[Candidate] = []
    violating: list[Candidate] = []
    out = DryRun([], {}, [])
    n = len(potential)
    for i in range(n):
        ni = potential[(offset + i) % n]
        victims, st = select_victims_on_node(handle, state, pod, preemptor, ni, pdbs, now, policy)
        if victims is not None and victims.pods:
            group = fine if victims.pdb_violations == 0 else violating
            if len(group) < wanted:
                group.append(Candidate(ni.name, victims))
            if fine and len(fine) + len(violating) >= wanted:
                break
            continue
        if st is None:
            st = Status.error(f"expected at least one victim pod on node {ni.name!r}")
        if st.code is Code.ERROR:
            out.errors.append(st.message)
        out.statuses[ni.name] = st
    out.candidates = fine + violating
    return out


def _scores(now: float) -> list[Callable[[Candidate], float]]:
    """Bigger is better, in order of precedence."""

    def fewest_violations(c: Candidate) -> float:
        return -c.victims.pdb_violations

    def lowest_top_priority(c: Candidate) -> float:
        return -c.victims.pods[0].priority

    def smallest_priority_sum(c: Candidate) -> float:
        return -sum(p.priority + _PRIORITY_SHIFT for p in c.victims.pods)

    def fewest_victims(c: Candidate) -> float:
        return -len(c.victims.pods)

    def latest_start(c: Candidate) -> float:
        """The earliest start among the victims of the highest priority: the later, the better."""
        top = max(p.priority for p in c.victims.pods)
        return min(start_time(p, now) for p in c.victims.pods if p.priority == top)

    return [fewest_violations, lowest_top_priority, smallest_priority_sum, fewest_victims, latest_start]


def pick_one(candidates: Sequence[Candidate], now: float) -> Candidate:
    remaining = list(candidates)
    for score in _scores(now):
        if len(remaining) == 1:
            break
        values = [score(c) for c in remaining]
        best = max(values)
        remaining = [c for c, v in zip(remaining, values, strict=True) if v == best]
    return remaining[0]
