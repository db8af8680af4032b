"""What a preemption plugin built on this evaluator decides for itself (the parts of kube-scheduler's
preemption ``Interface`` that Koordinator's ElasticQuota overrides): which pods may be victims of which
preemptor, what else the preemptor must fit once victims are gone, and which nodes the dry run tries
(a plugin that knows where its victims are can leave the others out before the dry run visits them).
:class:`LowerPriority` is kube-scheduler's DefaultPreemption's answer."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol

from koord.scheduler.framework import CycleState, NodeInfo, Obj, PodInfo, Status
from koord.scheduler.plugins.defaultpreemption.args import PreemptionArgs


class VictimPolicy(Protocol):
    def can_preempt(self, preemptor: PodInfo, victim: PodInfo) -> bool:
        """Whether ``victim`` may make room for ``preemptor``."""

    def fits(self, state: CycleState, pod: Obj) -> Status | None:
        """Besides the profile's filters, why ``pod`` does not fit with the victims removed so far (the
        PreFilter extensions have kept ``state`` up to date); ``None`` when it does."""

    def nodes(self, preemptor: PodInfo, potential: Sequence[NodeInfo]) -> Sequence[NodeInfo]:
        """Of the nodes the filters found ``Unschedulable``, those that may hold victims."""

    def candidates(self, potential: int, rng: random.Random) -> tuple[int, int]:
        """Where among the ``potential`` nodes the dry run starts, and how many candidates it wants."""


class LowerPriority:
    """kube-scheduler's: any pod of lower priority, the filters alone, ``minCandidateNodes*`` candidates
    from a random node on (``GetOffsetAndNumCandidates``)."""

    def __init__(self, args: PreemptionArgs) -> None:
        self._args = args

    def can_preempt(self, preemptor: PodInfo, victim: PodInfo) -> bool:
        return victim.priority < preemptor.priority

    def fits(self, state: CycleState, pod: Obj) -> Status | None:
        return None

    def nodes(self, preemptor: PodInfo, potential: Sequence[NodeInfo]) -> Sequence[NodeInfo]:
        return potential

    def candidates(self, potential: int, rng: random.Random) -> tuple[int, int]:
        return rng.randrange(potential), self._args.num_candidates(potential)
