"""Reservation: room held on a node for the pods a Reservation names (Koordinator's
``pkg/scheduler/plugins/reservation``, v1.8 semantics); enable it at every point Koordinator's profile does
(``score`` weight 5000, ``bind`` before DefaultBinder). Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from koord.scheduler.framework import (
    SKIP,
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    CodedVerdicts,
    CycleState,
    NodeInfo,
    NodeSet,
    Obj,
    PodInfo,
    PodRequirement,
    PreFilterResult,
    ReservationInfo,
    SchedulerHandle,
    Status,
)
from koord.scheduler.framework.events import ASSIGNED_POD_DELETE
from koord.scheduler.framework.extension import Controller, ReservationHooks
from koord.scheduler.framework.reservation import ASSUMED_RESERVATION
from koord.scheduler.framework.types import PostFilterResult
from koord.scheduler.plugins.reservation import fit, messages, nominate, rounds, status
from koord.scheduler.plugins.reservation.args import ReservationArgs, parse_args
from koord.scheduler.plugins.reservation.rounds import Round
from koord.scheduler.plugins.reservation.shared import reference, shared_for
from koord.scheduler.plugins.reservation.state import STATE_KEY, CycleData, NodeState, data_of
from koord.scheduler.plugins.reservation.transform import Restorer
from koordshared.apis.core.pod import as_map
from koordshared.apis.meta import groups
from koordshared.apis.scheduling import reservation as rsv
from koordshared.apis.scheduling.reservation import is_reserve_pod, pinned_node, reservation_name

NAME = "Reservation"
RESERVATION = "Reservation"


class Reservation:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        self.args: ReservationArgs = parse_args(args)
        if not callable(getattr(handle, "add_virtual_pod", None)):
            raise ValueError("runs in koord-scheduler only (it schedules reservations as reserve pods)")
        self.handle = cast(SchedulerHandle, handle)
        self.shared = shared_for(self.handle, self.args)
        self.cache = self.shared.cache
        self.hooks = ReservationHooks(())
        self.restorer = Restorer(self.handle, self.cache, self.hooks)
        self._answers: dict[
            tuple[object, ...], tuple[NodeInfo, NodeState, Status | ReservationInfo | None]
        ] = {}
        """(node, pod shape, reservations) -> the restored node and its state the fit answer (or the
        nomination) was of (each replaced, never changed, when its inputs change), and the answer."""
        self._keeps_answers = True
        self._keeps_nominations = True

    def use_reservation_hooks(self, hooks: ReservationHooks) -> None:
        self.hooks = hooks
        self.restorer = Restorer(self.handle, self.cache, hooks)
        # Another plugin's reservation filter may answer differently for the same node and shape.
        self._keeps_answers = all(p is self for p in hooks.filters)
        self._keeps_nominations = self._keeps_answers and all(p is self for p in hooks.scorers)

    def new_controllers(self) -> Sequence[Controller]:
        return (self.shared.controller,)

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ASSIGNED_POD_DELETE),
            ClusterEventWithHint(ClusterEvent(RESERVATION, Action.ADD | Action.UPDATE | Action.DELETE)),
        )

    # ---- PreFilter and Filter ------------------------------------------------------------------------

    def before_pre_filter(self, state: CycleState, pod: Obj) -> tuple[Obj, bool, Status | None]:
        data = self.restorer.prepare(state, pod)
        if isinstance(data, Status):
            return pod, False, data
        state.write(STATE_KEY, data)
        return pod, bool(data.nodes), None

    def after_pre_filter(self, state: CycleState, pod: Obj, result: PreFilterResult | None) -> Status | None:
        return None

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | PreFilterResult | None:
        data = data_of(state)
        if data.reserve is not None:
            return None
        if data.has_affinity:
            if not data.nodes:
                return Status.unresolvable(messages.ERR_AFFINITY)
            return PreFilterResult(frozenset(data.nodes))
        return None if data.nodes else SKIP

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        return self._filter(state, pod, data_of(state), node_info)

    def _filter(self, state: CycleState, pod: Obj, data: CycleData, node_info: NodeInfo) -> Status | None:
        if data.reserve is not None:
            return self._filter_reserve_pod(data.reserve, pod, node_info)
        ns = data.nodes.get(node_info.name)
        if ns is None or not ns.matched:
            return Status.unresolvable(messages.ERR_AFFINITY) if data.has_affinity else None
        return self._filter_with(state, pod, data, node_info, ns.matched, data.has_affinity)

    def filter_nodes(
        self, state: CycleState, pod: Obj, nodes: NodeSet
    ) -> CodedVerdicts | list[Status | None]:
        """Only the nodes with something to check are looked at (a reserve pod: with reservations, or
        all when it is pinned; another pod: with matched reservations, or all with an affinity)."""
        data = data_of(state)
        if data.reserve is not None:
            busy = set(self.cache.nodes())
            everywhere = bool(pinned_node(pod))
            return [
                self._filter(state, pod, data, ni) if everywhere or ni.name in busy else None for ni in nodes
            ]
        kept = rounds.of(state)
        if kept is not None and self._keeps_answers and not data.preemptible and not data.preemptible_in:
            # The answers of the round's nodes examined again are worked out; the others' stand.
            for name in kept.unfit:
                ni = self.handle.node_info(name)
                st = None if ni is None or name not in data.nodes else self._filter(state, pod, data, ni)
                if st is not None:
                    kept.refused[name] = st
            kept.unfit.clear()
            return _refusals(kept.refused, nodes)
        if not data.has_affinity:
            return [self._filter(state, pod, data, ni) if ni.name in data.nodes else None for ni in nodes]
        return [self._filter(state, pod, data, ni) for ni in nodes]

    def _filter_reserve_pod(self, r: ReservationInfo, pod: Obj, ni: NodeInfo) -> Status | None:
        pinned = pinned_node(pod)
        if pinned and pinned != ni.name:
            return Status.unresolvable(messages.ERR_NODE_NOT_MATCH)
        mine = r.allocate_policy
        for other in self.cache.on_node(ni.name):
            theirs = other.allocate_policy
            if other.is_matchable() and mine != theirs and "" in (mine, theirs):
                return Status.unresolvable(messages.ERR_POLICY_CONFLICT)
        return None

    def _filter_with(
        self,
        state: CycleState,
        pod: Obj,
        data: CycleData,
        ni: NodeInfo,
        matched: Sequence[ReservationInfo],
        required: bool,
    ) -> Status | None:
        """``filterWithReservations``."""
        if data.ignored:
            return None
        ns = data.nodes[ni.name]
        if not self._keeps_answers or ni.name in data.preemptible or ni.name in data.preemptible_in:
            return self._fit_with(state, pod, data, ni, ns, matched, required)
        # The same restored node, reservations and pod shape as an earlier cycle: the same answer.
        key = (ni.name, required, data.shape(), *matched)
        found, kept = self._kept_answer(key, ni, ns)
        if found:
            return cast(Status | None, kept)
        answer = self._fit_with(state, pod, data, ni, ns, matched, required)
        self._keep_answer(key, ni, ns, answer)
        return answer

    def _kept_answer(
        self, key: tuple[object, ...], ni: NodeInfo, ns: NodeState
    ) -> tuple[bool, Status | ReservationInfo | None]:
        """The answer kept under ``key`` if it was of this very restored node and state."""
        kept = self._answers.get(key)
        if kept is not None and kept[0] is ni and kept[1].unmatched == ns.unmatched:
            return True, kept[2]
        return False, None

    def _keep_answer(
        self, key: tuple[object, ...], ni: NodeInfo, ns: NodeState, answer: Status | ReservationInfo | None
    ) -> None:
        if len(self._answers) > 8 * max(len(self.cache.nodes()), 64):
            self._answers.clear()  # shapes and reservations long gone
        self._answers[key] = (ni, ns, answer)

    def _fit_with(
        self,
        state: CycleState,
        pod: Obj,
        data: CycleData,
        ni: NodeInfo,
        ns: NodeState,
        matched: Sequence[ReservationInfo],
        required: bool,
    ) -> Status | None:
        short: set[str] = set()
        refused: list[str] = []
        asked = set(data.requests)
        freed = data.preemptible.get(ni.name, {})
        freed_in = data.preemptible_in.get(ni.name, {})
        detailed = bool(data.reservation_name)
        for r in matched:
            if not data.has_affinity and not asked & set(r.resource_names):
                continue
            if data.reservation_name and data.reservation_name != r.name:
                continue
            lacks, no = fit.fits_one(
                data.requests, ni, ns, r, detailed, self.args, freed, freed_in.get(r.uid, {})
            )
            short.update(lacks)
            refused.extend(no)
            st = self.hooks.filter(state, pod, r, ni.name)
            if st is not None:
                refused.extend(st.reasons)
                continue
            if not lacks and not no:
                return None
        if required:
            return Status.unschedulable(*(fit.by_node(sorted(short)) + refused or [fit.NO_RESERVATION_FITS]))
        if short:
            return Status.unschedulable(*fit.by_node(sorted(short)))
        alone = fit.fits_node(data.requests, ni, ns.pod_requested, ns.r_allocated, {}, self.args, freed)
        return Status.unschedulable(*fit.by_node(alone)) if alone else None

    def add_pod(self, state: CycleState, pod: Obj, to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        """Preemption's what-if put a victim back on the node (Koordinator's ``AddPod``)."""
        data = data_of(state)
        data.freed(node_info.name, self.cache.reservation_of(to_add.uid), to_add.requests, -1)
        return None

    def remove_pod(
        self, state: CycleState, pod: Obj, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        """Preemption's what-if took a victim off the node: its room counts as free, inside the
        reservation it was placed in if any (Koordinator's ``RemovePod``)."""
        data = data_of(state)
        data.freed(node_info.name, self.cache.reservation_of(to_remove.uid), to_remove.requests, 1)
        return None

    def post_filter(
        self, state: CycleState, pod: Obj, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        data = data_of(state)
        if data.reserve is not None:
            # A reservation preempts no pod (it is no pod the preemption could nominate): PostFilter ends
            # here for it, and it waits for room.
            return None, Status.unresolvable()
        return None, Status.unschedulable(*messages.post_filter_reasons(data, statuses))

    # ---- the reservation hooks of its own ----------------------------------------------------------

    def filter_reservation(
        self, state: CycleState, pod: Obj, reservation: ReservationInfo, node_name: str
    ) -> Status | None:
        return None

    def filter_nominate_reservation(
        self, state: CycleState, pod: Obj, reservation: ReservationInfo, node_name: str
    ) -> Status | None:
        if reservation.allocate_once and reservation.allocated_pods:
            return Status.unschedulable("reservation has allocateOnce enabled and has already been allocated")
        ni = self.handle.node_info(node_name)
        data = data_of(state)
        if ni is None or node_name not in data.nodes:
            return Status.unresolvable("missing node")
        return self._filter_with(state, pod, data, ni, [reservation], True)

    def score_reservation(
        self, state: CycleState, pod: Obj, reservation: ReservationInfo, node_name: str
    ) -> int:
        return nominate.most_allocated(data_of(state).requests, reservation)

    def nominate_reservation(
        self, state: CycleState, pod: Obj, node_name: str
    ) -> tuple[ReservationInfo | None, Status | None]:
        data = data_of(state)
        if data.reserve is not None or data.ignored:
            return None, None
        if node_name in data.nominated:
            return data.nominated[node_name], None
        ns = data.nodes.get(node_name)
        matched = ns.matched if ns is not None else []
        chosen: ReservationInfo | None = None
        if len(matched) == 1 and data.has_affinity:
            chosen = matched[0]
        elif matched:
            chosen = self._nominated(state, pod, data, node_name, matched)
        data.nominated[node_name] = chosen
        return chosen, None

    def _nominated(
        self, state: CycleState, pod: Obj, data: CycleData, node: str, matched: Sequence[ReservationInfo]
    ) -> ReservationInfo | None:
        ni = self.handle.node_info(node)
        ns = data.nodes[node]
        if (
            not self._keeps_nominations
            or ni is None
            or node in data.preemptible
            or node in data.preemptible_in
        ):
            return self._nominate(state, pod, node, matched)
        # As the fit answers: the same restored node, reservations and pod shape, the same choice.
        key = ("nominated", node, data.shape(), *matched)
        found, kept = self._kept_answer(key, ni, ns)
        if found:
            return cast(ReservationInfo | None, kept)
        chosen = self._nominate(state, pod, node, matched)
        self._keep_answer(key, ni, ns, chosen)
        return chosen

    def _nominate(
        self, state: CycleState, pod: Obj, node: str, matched: Sequence[ReservationInfo]
    ) -> ReservationInfo | None:
        ok = [r for r in matched if self.hooks.filter_nominate(state, pod, r, node) is None]
        ok.sort(key=_age)  # ties go to the oldest (then by name)
        chosen, _ = nominate.lowest_order(ok)
        if chosen is None and ok:
            scores = self.hooks.scores(state, pod, ok, node) if len(ok) > 1 else [0]
            chosen = ok[scores.index(max(scores))]
        return chosen

    # ---- Score ---------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Status | None:
        data = data_of(state)
        if data.reserve is not None or data.ignored or not data.nodes:
            return SKIP
        kept = rounds.of(state)
        if kept is not None and self._keeps_nominations and not data.preemptible and not data.preemptible_in:
            self._nominate_round(state, pod, data, kept)
            data.nominated.update(kept.nominated)
            same = isinstance(nodes, NodeSet) and nodes.snapshot is kept.snapshot
            data.scores = kept.scores if same else None
            data.preferred_node = _lowest_order(kept.orders, nodes) if kept.orders else ""
            return None
        orders: dict[str, int] = {}
        for ni in nodes:
            ns = data.nodes.get(ni.name)
            if ns is None or not ns.matched:
                continue
            _, order = nominate.lowest_order(ns.matched)
            if order:
                orders[ni.name] = order
            self.nominate_reservation(state, pod, ni.name)
        data.preferred_node = _lowest_order(orders, nodes) if orders else ""
        return None

    def _nominate_round(self, state: CycleState, pod: Obj, data: CycleData, kept: Round) -> None:
        """The nominations (and their scores, and the lowest orders) of the round's nodes examined again."""
        for name in kept.unnominated:
            ns = data.nodes.get(name)
            if ns is None or not ns.matched:
                continue
            chosen = self._nominated(state, pod, data, name, ns.matched)
            kept.nominated[name] = chosen
            kept.score(name, 0 if chosen is None else nominate.most_allocated(data.requests, chosen))
            _, order = nominate.lowest_order(ns.matched)
            if order:
                kept.orders[name] = order
        kept.unnominated.clear()

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        data = data_of(state)
        return 0 if data.reserve is not None else _score(data, node_info.name)

    def score_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> list[int] | np.ndarray:
        data = data_of(state)
        if data.reserve is not None:
            return [0] * len(nodes)
        snapshot, rows = nodes.snapshot, nodes.rows
        if data.scores is not None and snapshot is not None and rows is not None:
            out = np.zeros(len(rows), dtype=np.int64)
            known = rows < len(data.scores)
            out[known] = data.scores[rows[known]]
            if data.preferred_node:
                out[rows == snapshot.index[data.preferred_node]] = nominate.MOST_PREFERRED
            return out
        return [_score(data, ni.name) if ni.name in data.nodes else 0 for ni in nodes]

    def normalize_scores(self, state: CycleState, pod: Obj, scores: np.ndarray) -> np.ndarray:
        return scores if data_of(state).reserve is not None else nominate.normalized(scores)

    # ---- Reserve, PreBind, Bind ----------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        data = data_of(state)
        if data.reserve is not None:
            placed = {**data.reserve.reservation}
            placed["status"] = {**(placed.get("status") or {}), "nodeName": node_name}
            state.write(ASSUMED_RESERVATION, ReservationInfo.of(placed))
            return None
        if data.ignored:
            return None
        chosen, st = self.nominate_reservation(state, pod, node_name)
        if st is not None:
            return st
        if chosen is None:
            return Status.unschedulable(messages.ERR_AFFINITY) if data.has_affinity else None
        info = state.pod_info if state.pod_info is not None else PodInfo(pod)
        assumed = self.cache.assume(chosen.uid, PodRequirement.of(info))
        if isinstance(assumed, str):
            return Status.error(assumed)
        data.assumed = assumed
        return None

    def unreserve(self, state: CycleState, pod: Obj, node_name: str) -> None:
        data = data_of(state)
        if data.reserve is not None:
            state.delete(ASSUMED_RESERVATION)
            return
        if data.assumed is None:
            return
        info = state.pod_info if state.pod_info is not None else PodInfo(pod)
        self.cache.forget(data.assumed.uid, info.uid)
        if data.annotated:
            self._unannotate(pod, data.assumed, node_name)
        data.assumed = None

    def _unannotate(self, pod: Obj, r: ReservationInfo, node_name: str) -> None:
        """The binding failed after PreBind wrote ``reservation-allocated``: take it off again, unless the
        pod ended up bound there anyway (then it is the reservation's owner after all)."""
        meta = pod.get("metadata") or {}
        current = self.handle.get_pod(str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if current is None or PodInfo.uid_of(current) != PodInfo.uid_of(pod):
            return
        if (current.get("spec") or {}).get("nodeName") == node_name:
            return
        placed = rsv.allocated_of(current)
        if placed is None or placed[1] != r.uid:
            return
        patch = {"metadata": {"annotations": {rsv.ANNOTATION_RESERVATION_ALLOCATED: None}}}
        self.handle.patch_object(
            groups.PODS, str(meta.get("namespace") or ""), str(meta.get("name") or ""), patch
        )

    def pre_bind(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        data = data_of(state)
        if is_reserve_pod(pod) or data.ignored:
            return None
        if data.assumed is None:
            return Status.unschedulable(messages.ERR_AFFINITY) if data.has_affinity else None
        value = rsv.allocated_annotation(data.assumed.name, data.assumed.uid)
        self.handle.patch_pod(
            state, {"metadata": {"annotations": {rsv.ANNOTATION_RESERVATION_ALLOCATED: value}}}
        )
        data.annotated = True
        return None

    def bind(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        """A reserve pod's binding: its Reservation becomes Available on ``node_name``."""
        name = reservation_name(pod)
        if not name:
            return SKIP
        r = self.shared.store.get(name)
        if r is None:
            return Status.error(f"reservation {name} not found")
        if rsv.phase_of(r) == rsv.Phase.FAILED:
            return Status.error(messages.ERR_INACTIVE)
        requests = state.pod_info.requests if state.pod_info is not None else PodInfo(pod).requests
        patch = status.available(r, node_name, requests, self.handle.now())
        st = self.handle.patch_object(groups.RESERVATIONS, "", name, patch, subresource="status")
        if st is not None:
            return st
        # Available on the server now: an owner scheduled before the informer brings the change back (the
        # pods' and the reservations' watches are apart) must already find it (Koordinator assumes the
        # reservation on its node at Reserve for the same reason).
        self.shared.cache.reservation_changed({**r, "status": {**as_map(r, "status"), **patch["status"]}})
        note = f"Successfully assigned {name} to {node_name}"
        self.handle.event(reference(r), "Normal", "Scheduled", note, action="Binding")
        return None


def _score(data: CycleData, node: str) -> int:
    if data.preferred_node and data.preferred_node == node:
        return nominate.MOST_PREFERRED
    chosen = data.nominated.get(node)
    return 0 if chosen is None else nominate.most_allocated(data.requests, chosen)


def _refusals(refused: Mapping[str, Status], nodes: NodeSet) -> CodedVerdicts | list[Status | None]:
    """Filter's answers over ``nodes`` given its refusals by node (the others pass)."""
    snapshot, rows = nodes.snapshot, nodes.rows
    if snapshot is None or rows is None:
        return [refused.get(name) for name in nodes.names]
    codes = np.zeros(len(snapshot), dtype=np.int64)
    statuses: list[Status | None] = [None]
    code_of: dict[int, int] = {}
    for name, st in refused.items():
        row = snapshot.index.get(name)
        if row is not None:
            code = code_of.get(id(st))
            if code is None:
                code = code_of[id(st)] = len(statuses)
                statuses.append(st)
            codes[row] = code
    return CodedVerdicts(codes[rows], statuses)


def _lowest_order(orders: Mapping[str, int], nodes: Sequence[NodeInfo]) -> str:
    """The first of ``nodes`` whose matched reservations have the lowest order (``""``: none has one)."""
    best, best_order = "", 0
    for ni in nodes:
        order = orders.get(ni.name, 0)
        if order and (not best or order < best_order):
            best, best_order = ni.name, order
    return best


def _age(r: ReservationInfo) -> tuple[str, str]:
    return str((r.reservation.get("metadata") or {}).get("creationTimestamp") or ""), r.name
