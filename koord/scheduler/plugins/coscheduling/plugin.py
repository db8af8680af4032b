"""Coscheduling: all-or-nothing gangs (Koordinator's ``pkg/scheduler/plugins/coscheduling``, v1.8 semantics).

Pods sort by priority, then their gang group's queue time (QueueSort, Koordinator up to v1.6). A gang's
pods wait out of the active queue until the gang is defined and complete (PreEnqueue), are scheduled back
to back once the first is popped (NextPod), wait at Permit until every gang of the group is valid and are
then released together; a failed member rejects the waiting ones in Strict mode.
Details: ``docs/modules.md``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from koord.scheduler.framework import (
    SKIP,
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    NodeInfo,
    Obj,
    QueueingHint,
    SchedulerHandle,
    Status,
)
from koord.scheduler.framework.events import ASSIGNED_POD, NODE
from koord.scheduler.framework.extension import Controller
from koord.scheduler.framework.filterresult import fit_message
from koord.scheduler.framework.types import PostFilterResult
from koord.scheduler.plugins.coscheduling import messages
from koord.scheduler.plugins.coscheduling.args import CoschedulingArgs, parse_args
from koord.scheduler.plugins.coscheduling.cache import GangCache, Joined, StoreHandler
from koord.scheduler.plugins.coscheduling.controller import PodGroupController
from koord.scheduler.plugins.coscheduling.gang import Gang
from koord.scheduler.plugins.coscheduling.reporter import GANG_TIMEOUT, GangReporter
from koordshared.apis.core.pod import is_bound, pod_key, pod_uid
from koordshared.apis.extension.coscheduling import (
    BIND_GANG_GROUP_ID,
    BIND_GANG_MEMBER_COUNT,
    DEPRECATED_BIND_GANG_GROUP_ID,
    DEPRECATED_BIND_GANG_MEMBER_COUNT,
    GangMode,
    gang_name,
    in_pod_group,
)
from koordshared.apis.extension.qos import sub_priority
from koordshared.apis.meta import groups

NAME = "Coscheduling"
BIND_ANNOTATIONS = (
    BIND_GANG_GROUP_ID,
    BIND_GANG_MEMBER_COUNT,
    DEPRECATED_BIND_GANG_GROUP_ID,
    DEPRECATED_BIND_GANG_MEMBER_COUNT,
)


def _meta(pod: Obj) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def labels_of(pod: Obj) -> Mapping[str, str]:
    return _meta(pod).get("labels") or {}


def _since(gang: Gang | None, queued: float) -> float:
    """A pod's time in QueueSort: its gang group's (stamped with this pod's queue time when the group has
    none yet), or its own queue time outside gangs."""
    if gang is None:
        return queued
    if gang.group_info.since is None:
        gang.group_info.since = queued
    return gang.group_info.since


def _gang_key(pod: Obj) -> str:
    """``GetId(namespace, GetGangNameByPod)``: ``namespace/`` for a pod outside gangs."""
    return f"{_meta(pod).get('namespace') or ''}/{gang_name(pod)}"


def _room_freed(pod: Obj, old: Any, new: Any) -> QueueingHint:
    """An assigned pod's deletion frees room, unless it is a gang member the API server never bound: a
    rejected gang's Unreserve forgets its assumed members, each one such a deletion, and two gangs that
    cannot both fit would then requeue each other without end. A bound member leaving (a finished gang
    scaled down or done) frees room as any pod does."""
    freed = isinstance(old, Mapping) and (not gang_name(old) or is_bound(old))
    return QueueingHint.QUEUE if freed else QueueingHint.SKIP


_ROOM = (
    ClusterEventWithHint(ClusterEvent(NODE, Action.ADD | Action.UPDATE_NODE_ALLOCATABLE)),
    ClusterEventWithHint(ClusterEvent(ASSIGNED_POD, Action.DELETE), _room_freed),
)


@dataclass(eq=False)
class GangContext:
    """The gang group being scheduled back to back (Koordinator's ``GangSchedulingContext``)."""

    group: tuple[str, ...]
    offered: set[str] = field(default_factory=set)
    """Members handed to the scheduler (the first one, then each NextPod answer)."""
    attempted: set[str] = field(default_factory=set)
    """Members that reached their scheduling cycle."""
    failed_message: str = ""


class Coscheduling:
    name = NAME
    queue_sort_when_named = True
    """Sorts the queue only when a profile names it at queueSort (Koordinator's v1.6 profiles)."""

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        self.args: CoschedulingArgs = parse_args(args)
        if not hasattr(handle, "watch") or not hasattr(handle, "get_waiting_pod"):
            raise ValueError("runs in koord-scheduler only (it holds pods at Permit and watches PodGroups)")
        self.handle = cast(SchedulerHandle, handle)
        self.cache = GangCache(self.args)
        self._context: GangContext | None = None
        self.reporter = GangReporter(self.handle, self.gate_reason)
        pod_groups = self.handle.watch("podgroups", groups.PODGROUPS)
        self.status = PodGroupController(self.handle, pod_groups)
        self.handle.on_pods(self._pod_added, self._pod_updated, self._pod_deleted)
        pod_groups.add_handler(
            StoreHandler(self._pod_group_added, self._pod_group_updated, self._pod_group_deleted)
        )

    def new_controllers(self) -> Sequence[Controller]:
        return (self.status, self.reporter)

    # ---- the gang cache's informers ----------------------------------------------------------------

    def _joined(self, joined: Joined | None) -> None:
        if joined is None:
            return
        if joined.problems:
            self.reporter.problems("pod", joined.pod, joined.gang, joined.problems)
        if joined.activate:
            self.handle.activate(joined.activate)

    def _pod_added(self, pod: Obj) -> None:
        self._joined(self.cache.pod_added(pod))

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        self._joined(self.cache.pod_updated(old, new))

    def _pod_deleted(self, pod: Obj) -> None:
        self.cache.pod_deleted(pod)
        self.reporter.forget(pod)

    def _pod_group_added(self, pg: Obj) -> None:
        joined = self.cache.pod_group_added(pg)
        if joined.problems:
            self.reporter.problems("podgroup", pg, joined.gang, joined.problems)
        if joined.activate:
            self.handle.activate(joined.activate)

    def _pod_group_updated(self, old: Obj, new: Obj) -> None:
        if old is not new:
            self._pod_group_added(new)

    def _pod_group_deleted(self, pg: Obj) -> None:
        self.cache.pod_group_deleted(pg)

    # ---- QueueSort ---------------------------------------------------------------------------------

    def less(self, a: Any, b: Any) -> bool:
        """Koordinator's ``Coscheduling.Less``; a group keeps its first-seen time (Koordinator moves a
        group that failed a whole round behind the others; here NextPod already takes it whole)."""
        if a.priority != b.priority:
            return bool(a.priority > b.priority)
        sub_a, sub_b = sub_priority(labels_of(a.pod)), sub_priority(labels_of(b.pod))
        if sub_a != sub_b:
            return sub_a > sub_b
        with self.cache.lock:
            gang_a, gang_b = self.cache.of_pod(a.pod), self.cache.of_pod(b.pod)
            since_a, since_b = _since(gang_a, a.timestamp), _since(gang_b, b.timestamp)
            if since_a != since_b:
                return bool(since_a < since_b)
            group_a = gang_a.group_id if gang_a is not None else ""
            group_b = gang_b.group_id if gang_b is not None else ""
        if group_a != group_b:
            return group_a < group_b
        id_a, id_b = _gang_key(a.pod), _gang_key(b.pod)
        if id_a != id_b:
            return id_a < id_b
        return str(_meta(a.pod).get("name") or "") < str(_meta(b.pod).get("name") or "")

    # ---- gating ------------------------------------------------------------------------------------

    def _group(self, gang: Gang) -> list[Gang]:
        return [g for gid in gang.group if (g := self.cache.get(gid)) is not None]

    def _gate(self, pod: Obj) -> str:
        """Why the gang's pod may not be scheduled now (``""``: it may); hold the cache lock."""
        name = gang_name(pod)
        if not name:
            return ""
        gang = self.cache.of_pod(pod)
        if gang is None or gang.spec is None:
            gid = f"{pod_key(pod).split('/', 1)[0]}/{name}"
            if gang is not None and gang.error:
                return f"gang {gid}: {gang.error}"
            if in_pod_group(pod):
                return f"gang {gid}: PodGroup {gid} not found"
            return f"gang {gid}: not defined yet"
        if gang.satisfied_once():
            return ""
        missing: list[str] = []
        undefined: list[tuple[str, str]] = []
        short: list[Gang] = []
        for gid in gang.group:
            member = self.cache.get(gid)
            if member is None:
                missing.append(gid)
            elif member.spec is None:
                undefined.append((gid, member.error or "its PodGroup was not found"))
            elif len(member.children) < member.min_member:
                short.append(member)
        if not (missing or undefined or short):
            return ""
        return messages.incomplete(gang.group, missing, undefined, short, self._group(gang))

    def gate_reason(self, pod: Obj) -> str:
        with self.cache.lock:
            return self._gate(pod)

    def pre_enqueue(self, pod: Obj) -> Status | None:
        if not gang_name(pod):
            return None
        why = self.gate_reason(pod)
        if not why:
            return None
        self.reporter.gated(pod)
        return Status.unresolvable(why)

    # ---- the scheduling context --------------------------------------------------------------------

    def next_pod(self) -> Obj | None:
        """The group's next pending member not yet handed out; ``None`` ends the context."""
        reject: tuple[list[str], str] | None = None
        with self.cache.lock:
            ctx = self._context
            if ctx is None:
                return None
            for gid in ctx.group:
                gang = self.cache.get(gid)
                for key, pod in (gang.pending if gang is not None else {}).items():
                    if key not in ctx.offered:
                        ctx.offered.add(key)
                        return pod
            self._context = None
            gangs = [g for gid in ctx.group if (g := self.cache.get(gid)) is not None]
            held = any(key not in ctx.attempted for key in ctx.offered)
            if gangs and (ctx.failed_message or not held):
                why = ctx.failed_message or messages.rejected(ctx.group, gangs, messages.exhausted())
                reject = (self._detach(gangs), why)
        if reject is not None:
            self._reject(*reject)
        return None

    def before_pre_filter(self, state: CycleState, pod: Obj) -> tuple[Obj, bool, Status | None]:
        if not gang_name(pod):
            return pod, False, None
        key = pod_key(pod)
        with self.cache.lock:
            why = self._gate(pod)
            if why:
                return pod, False, Status.unresolvable(why)
            gang = self.cache.of_pod(pod)
            if gang is None or gang.satisfied_once():
                return pod, False, None
            ctx = self._context
            if ctx is None or gang.id not in ctx.group:
                self._context = GangContext(gang.group, {key}, {key})
                return pod, False, None
            ctx.offered.add(key)
            ctx.attempted.add(key)
            if ctx.failed_message:
                return pod, False, Status.unresolvable(ctx.failed_message)
        return pod, False, None

    def after_pre_filter(self, state: CycleState, pod: Obj, result: Any) -> Status | None:
        return None

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        return None

    def post_filter(
        self, state: CycleState, pod: Obj, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        """No preemption of its own: says what the member's failure does to its gang."""
        with self.cache.lock:
            gang = self.cache.of_pod(pod)
            if gang is None or gang.satisfied_once():
                return None, Status.unschedulable()
            gangs = self._group(gang)
            head, count = messages.subject(gang.group), messages.waiting(gangs)
            if gang.mode is GangMode.STRICT:
                return None, Status.unschedulable(f"{head}: rejected with {count} (Strict)")
            return None, Status.unschedulable(
                messages.kept(gang.group, gangs, until="until every pending member was tried")
            )

    def after_post_filter(self, state: CycleState, pod: Obj, statuses: Mapping[str, Status]) -> None:
        if not gang_name(pod):
            return
        with self.cache.lock:
            gang = self.cache.of_pod(pod)
            if gang is None or gang.satisfied_once():
                return
            gangs = self._group(gang)
            ctx = self._context
            message = ctx.failed_message if ctx is not None and gang.id in ctx.group else ""
            if not message:
                fit = fit_message(len(self.handle.node_infos()), statuses) if statuses else "not schedulable"
                message = messages.rejected(gang.group, gangs, messages.cannot_place(pod_key(pod), fit))
                if ctx is not None and gang.id in ctx.group:
                    ctx.failed_message = message
            if gang.mode is not GangMode.STRICT:
                return
            for g in gangs:
                g.group_info.waiting_gangs.clear()
                g.group_info.binding_members = frozenset()
            uids = self._detach(gangs)
        self._reject(uids, message)

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Status | None:
        return SKIP  # only network-topology gangs are scored, and those are not ported

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        return 0

    # ---- Reserve, Permit and binding ---------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        return None

    def permit(self, state: CycleState, pod: Obj, node_name: str) -> tuple[Status | None, float]:
        if not gang_name(pod):
            return None, 0.0
        with self.cache.lock:
            gang = self.cache.of_pod(pod)
            if gang is None:
                return Status.unschedulable("Gang not found"), 0.0
            gang.add_waiting(pod, self.handle.now())
            gangs = [self.cache.get(gid) for gid in gang.group]
            if not all(g is not None and g.valid_for_permit() for g in gangs):
                gang.group_info.waiting_gangs.update(gang.group)
                return Status.wait(messages.wait_reason(gang)), gang.wait_seconds
            present = [g for g in gangs if g is not None]
            info = gang.group_info
            if not info.binding_members:
                info.binding_members = frozenset(pod_uid(p) for g in present for p in g.waiting.values())
            uids = [u for u in self._waiting_uids(present) if u != pod_uid(pod)]
            if self._context is not None and gang.id in self._context.group:
                self._context = None
        for uid in uids:
            waiting = self.handle.get_waiting_pod(uid)
            if waiting is not None:
                waiting.allow(NAME)
        return None, 0.0

    def unreserve(self, state: CycleState, pod: Obj, node_name: str) -> None:
        if not gang_name(pod):
            return
        key = pod_key(pod)
        note, uids, message = "", [], ""
        with self.cache.lock:
            gang = self.cache.of_pod(pod)
            if gang is None:
                return
            since = gang.waiting_since.get(key)
            gang.remove_waiting(pod)
            if gang.satisfied_once():
                return
            gangs = self._group(gang)
            timed_out = since is not None and self.handle.now() - since + 1e-3 >= gang.wait_seconds
            why = messages.timed_out(key, gang.wait_seconds) if timed_out else messages.left_permit(key)
            strict = gang.mode is GangMode.STRICT
            if timed_out:
                note = (messages.rejected if strict else messages.kept)(gang.group, gangs, why)
            if strict and any(g.waiting for g in gangs):
                message = messages.rejected(gang.group, gangs, why)
                uids = self._detach(gangs)
        if note:  # the framework's timeout message names the plugin; this says what became of the gang
            self.handle.event(pod, "Warning", GANG_TIMEOUT, note)
        self._reject(uids, message)

    def pre_bind(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        if not gang_name(pod):
            return None
        with self.cache.lock:
            gang = self.cache.of_pod(pod)
            members = gang.group_info.binding_members if gang is not None else frozenset()
            group_id = gang.group_id if gang is not None else ""
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        if len(members) > 1 and pod_uid(pod) in members:
            count = str(len(members))
            values: dict[str, str | None] = {
                BIND_GANG_GROUP_ID: group_id,
                BIND_GANG_MEMBER_COUNT: count,
                DEPRECATED_BIND_GANG_GROUP_ID: group_id,
                DEPRECATED_BIND_GANG_MEMBER_COUNT: count,
            }
        else:
            values = {k: None for k in BIND_ANNOTATIONS if k in annotations}
        if values:
            self.handle.patch_pod(state, {"metadata": {"annotations": values}})
        return None

    def post_bind(self, state: CycleState, pod: Obj, node_name: str) -> None:
        if not gang_name(pod):
            return
        with self.cache.lock:
            gang = self.cache.of_pod(pod)
            if gang is not None:
                gang.add_bound(pod)

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        """Room appearing: a node added or its allocatable grown, an assigned pod deleted (a gang member
        only when the API server had bound it: :func:`_room_freed`).
        Koordinator registers none: a member the gang held back returns when a member that failed on its
        own comes back (NextPod then takes the rest), when its gang completes, or at the queue's flush.
        But when every member's last rejection was the gang's (a member's Unreserve rejects whoever of a
        later round already waits), none failed on its own, and the gang waited minutes for the flush
        with room free."""
        return _ROOM

    # ---- helpers -----------------------------------------------------------------------------------

    @staticmethod
    def _waiting_uids(gangs: Sequence[Gang]) -> list[str]:
        return [pod_uid(p) for g in gangs for p in g.waiting.values()]

    @staticmethod
    def _detach(gangs: Sequence[Gang]) -> list[str]:
        """Take the gangs' waiting members off Permit (hold the lock): they count as pending again at
        once, so a concurrent Unreserve sees no one left to reject; the UIDs to reject."""
        uids = []
        for g in gangs:
            for p in list(g.waiting.values()):
                uids.append(pod_uid(p))
                g.remove_waiting(p)
        return uids

    def _reject(self, uids: Sequence[str], message: str) -> None:
        """Reject these waiting pods (outside the cache lock: a rejection unreserves on another thread)."""
        for uid in uids:
            waiting = self.handle.get_waiting_pod(uid)
            if waiting is not None:
                waiting.reject(NAME, message)
