"""DefaultPreemption (PostFilter; kube-scheduler's ``defaultpreemption`` and ``framework/preemption``): when
no node fits a pod, find a node where removing pods of lower priority makes room, nominate the pod to it
(the scheduler writes ``status.nominatedNodeName``) and delete the victims. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Mapping
from typing import Any

from koord.scheduler.framework import (
    Code,
    CycleState,
    Obj,
    PodInfo,
    PostFilterResult,
    SchedulerHandle,
    Status,
)
from koord.scheduler.framework.filterresult import fit_message
from koord.scheduler.framework.nominator import nominated_node_name
from koord.scheduler.plugins.defaultpreemption.args import parse_args
from koord.scheduler.plugins.defaultpreemption.candidates import Candidate, dry_run, pick_one
from koord.scheduler.plugins.defaultpreemption.policy import LowerPriority, VictimPolicy
from koord.scheduler.plugins.defaultpreemption.victims import NONE_HERE, budgets
from koordshared.apis.core.pod import condition
from koordshared.apis.meta import groups
from koordshared.apis.meta.quantity import format_time

log = logging.getLogger(__name__)

NAME = "DefaultPreemption"
PDB_CACHE = "poddisruptionbudgets"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING = "not eligible due to a terminating pod on the nominated node."
NOT_HELPFUL = Status.unresolvable("Preemption is not helpful for scheduling")
IN_PROGRESS = "waiting for the preemption for this pod to be finished"


def terminating_by_preemption(pod: Obj) -> bool:
    """Being deleted, and marked by a scheduler's preemption (kube's ``podTerminatingByPreemption``)."""
    if not (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    c = condition(pod, DISRUPTION_TARGET)
    return c is not None and c.get("status") == "True" and c.get("reason") == PREEMPTION_BY_SCHEDULER


class DefaultPreemption:
    name = NAME

    def __init__(
        self,
        args: Mapping[str, Any] | None,
        handle: Any,
        *,
        name: str = NAME,
        policy: VictimPolicy | None = None,
    ) -> None:
        self.name = name
        self.args = parse_args(args)
        self.policy: VictimPolicy = policy or LowerPriority(self.args)
        if not callable(getattr(handle, "run_filter_plugins_with_nominated_pods", None)):
            raise ValueError("needs koord-scheduler's handle (it is a PostFilter plugin of koord-scheduler)")
        self.handle: SchedulerHandle = handle
        self.pdbs = handle.watch(PDB_CACHE, groups.PDBS)
        self.rng = random.Random()
        """Picks the dry run's first node (tests may seed it)."""
        self._lock = threading.Lock()
        self._preempting: set[str] = set()

    def post_filter(
        self, state: CycleState, pod: Obj, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        self.handle.count_preemption_attempt()
        result, st = self._preempt(state, pod, statuses)
        if st is not None and st.message:
            st = Status(st.code, (f"preemption: {st.message}",))
        return result, st

    def preempting(self, uid: str) -> bool:
        """Whether the victims of the pod's last preemption are still being deleted."""
        with self._lock:
            return uid in self._preempting

    def _preempt(
        self, state: CycleState, pod: Obj, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        given = PodInfo(pod)
        latest = self.handle.get_pod(given.namespace, given.name)
        if latest is None:
            return None, Status.error(f"pod {given.key} is not in the scheduler's cache")
        preemptor = PodInfo(latest)
        if self.preempting(preemptor.uid):
            return None, Status.unschedulable(IN_PROGRESS)
        why = self.ineligible(preemptor, statuses)
        if why:
            return None, Status.unschedulable(why)
        nodes = self.handle.node_infos()
        if not nodes:
            return None, Status.error("no nodes available")
        # Nodes whose filters said Unschedulable; without a status, a node failed unresolvably.
        unschedulable = [ni for ni in nodes if _code(statuses.get(ni.name)) is Code.UNSCHEDULABLE]
        potential = list(self.policy.nodes(preemptor, unschedulable))
        # The nodes the policy knows hold no victims answer as a dry run there would.
        kept = {ni.name for ni in potential}
        none_here = {ni.name: NONE_HERE for ni in unschedulable if ni.name not in kept}
        if not potential:
            message = fit_message(len(nodes), none_here, absent=NOT_HELPFUL)
            return PostFilterResult(""), Status.unschedulable(message)
        now = self.handle.now()
        offset, wanted = self.policy.candidates(len(potential), self.rng)
        run = dry_run(
            self.handle,
            state,
            latest,
            preemptor,
            potential,
            budgets(self.pdbs.objects()),
            offset,
            wanted,
            now,
            self.policy,
        )
        if not run.candidates:
            if run.errors:
                return None, Status.error("; ".join(run.errors))
            message = fit_message(len(nodes), {**none_here, **run.statuses}, absent=NOT_HELPFUL)
            return PostFilterResult(""), Status.unschedulable(message)
        best = pick_one(run.candidates, now)
        self._prepare(best, preemptor)
        return PostFilterResult(best.node), None

    def ineligible(self, preemptor: PodInfo, statuses: Mapping[str, Status]) -> str:
        """Why the pod may not preempt now (kube's ``PodEligibleToPreemptOthers``); "" when it may."""
        if preemptor.spec.get("preemptionPolicy") == "Never":
            return NEVER
        nominated = nominated_node_name(preemptor.pod)
        if not nominated:
            return ""
        st = statuses.get(nominated)
        if st is None or st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return ""  # the nominated node cannot take it any more: preempting elsewhere is fine
        node = self.handle.node_info(nominated)
        if node is not None and any(
            terminating_by_preemption(p.pod) and self.policy.can_preempt(preemptor, p)
            for p in node.pods.values()
        ):
            return TERMINATING
        return ""

    # ---- carrying it out --------------------------------------------------------------------------

    def _prepare(self, best: Candidate, preemptor: PodInfo) -> None:
        """Start deleting the victims beside the scheduling loop (kube's ``prepareCandidateAsync``)."""
        self.handle.observe_preemption_victims(len(best.victims.pods))
        victims = [v for v in best.victims.pods if not v.is_terminating]
        if not victims:
            return
        with self._lock:
            self._preempting.add(preemptor.uid)
        threading.Thread(
            target=self._carry_out, args=(best.node, preemptor, victims), name="preemption", daemon=True
        ).start()

    def _carry_out(self, node: str, preemptor: PodInfo, victims: list[PodInfo]) -> None:
        ok = True
        try:
            for p in self.handle.nominated_pods_for_node(node):
                if p.priority < preemptor.priority and p.uid != preemptor.uid:
                    # It may not fit there any more: let it look for another node at once.
                    st = self.handle.update_pod_status(p.pod, None, "")
                    if st is not None:
                        log.warning("clearing the nominated node of %s: %s", p.key, st.message)
                        ok = False
            for victim in victims:
                if not self._preempt_pod(node, preemptor, victim):
                    ok = False
                    break
        except Exception:
            log.exception("preemption for %s on %s failed", preemptor.key, node)
            ok = False
        finally:
            with self._lock:
                self._preempting.discard(preemptor.uid)
        if not ok:
            self.handle.activate([preemptor.pod])

    def _preempt_pod(self, node: str, preemptor: PodInfo, victim: PodInfo) -> bool:
        waiting = self.handle.get_waiting_pod(victim.uid)
        if waiting is not None:
            waiting.reject(self.name, "preempted")
        else:
            scheduler = str(preemptor.spec.get("schedulerName") or "default-scheduler")
            mark = {
                "type": DISRUPTION_TARGET,
                "status": "True",
                "reason": PREEMPTION_BY_SCHEDULER,
                "message": f"{scheduler}: preempting to accommodate a higher priority pod",
                "lastTransitionTime": format_time(self.handle.now()),
            }
            if not _has_condition(victim.pod, mark):
                st = self.handle.update_pod_status(victim.pod, mark, None)
                if st is not None:
                    log.warning("marking %s as preempted: %s", victim.key, st.message)
                    return False
            st = self.handle.delete_pod(victim.pod)
            if st is not None:
                log.warning("deleting %s (preempted by %s): %s", victim.key, preemptor.key, st.message)
                return False
        self.handle.event(
            victim.pod,
            "Normal",
            "Preempted",
            f"Preempted by pod {preemptor.uid} on node {node}",
            action="Preempting",
            related=preemptor.pod,
        )
        log.info("%s preempted %s on %s", preemptor.key, victim.key, node)
        return True


def _code(st: Status | None) -> Code:
    return Code.UNSCHEDULABLE_AND_UNRESOLVABLE if st is None else st.code


def _has_condition(pod: Obj, want: Mapping[str, str]) -> bool:
    c = condition(pod, want["type"])
    return c is not None and all(c.get(k) == want[k] for k in ("status", "reason", "message"))
