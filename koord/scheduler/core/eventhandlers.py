"""Informer events into the scheduler (kube-scheduler's ``eventhandlers.go``): bound pods into the cache,
pending pods of this scheduler's profiles into the queue (their nominations into the nominator), nodes into
the cache; every change that may make an unschedulable pod fit becomes a cluster event for the queue's
hints. A pending pod that is assumed (being bound) is left alone; a pending pod deleted while it waits on
Permit is rejected there, and one deleted while assumed leaves the cache at once."""

from __future__ import annotations

from typing import Any, Protocol

from koord.scheduler.cache.cache import Cache
from koord.scheduler.core.metrics import SchedulerMetrics
from koord.scheduler.framework import events
from koord.scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint
from koord.scheduler.framework.nominator import Nominator, nominated_node_name
from koord.scheduler.framework.runtime import Framework
from koord.scheduler.framework.types import Obj, PodInfo
from koord.scheduler.queue.queue import SchedulingQueue
from koordshared.kube.informer import EventHandler


class SchedulerParts(Protocol):
    """What the event handlers and the handle read off the scheduler (the :class:`~.scheduler.Scheduler`
    has them all), so neither imports it."""

    cache: Cache
    queue: SchedulingQueue
    nominator: Nominator
    metrics: SchedulerMetrics
    virtual_pods: dict[str, Obj]
    """Pods that exist only in the scheduler (reserve pods), by key."""

    def events(self) -> dict[str, dict[str, tuple[ClusterEventWithHint, ...]]]: ...

    def framework_for(self, pod: Obj) -> Framework | None: ...

    def responsible_for(self, pod: Obj) -> bool: ...

    def forget_condition(self, uid: str) -> None: ...

    def reject_waiting(self, uid: str, message: str) -> None: ...

    def room_freed(self, pod: Obj, node: str) -> None: ...


def _assigned(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def _terminating(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


_uid = PodInfo.uid_of


_VERSIONS = ("resourceVersion", "generation", "managedFields")


def _status_only(old: Obj, new: Obj) -> bool:
    def rest(pod: Obj) -> tuple[dict[str, Any], dict[str, Any]]:
        meta = {k: v for k, v in (pod.get("metadata") or {}).items() if k not in _VERSIONS}
        return meta, {k: v for k, v in pod.items() if k not in ("metadata", "status")}

    return rest(old) == rest(new)


class EventHandlers:
    def __init__(self, sched: SchedulerParts) -> None:
        self.sched = sched

    def attach(self, pods: Any, nodes: Any) -> None:
        pods.add_handler(EventHandler(self.pod_added, self.pod_updated, self.pod_deleted))
        nodes.add_handler(EventHandler(self.node_added, self.node_updated, self.node_deleted))

    # ---- pods -----------------------------------------------------------------------------------

    def pod_added(self, pod: Obj) -> None:
        s = self.sched
        if _assigned(pod):
            s.cache.add_pod(pod)
            s.queue.on_event(events.ASSIGNED_POD_ADD, None, pod)
        elif s.responsible_for(pod) and not _terminating(pod):
            s.queue.add(pod)
            if nominated_node_name(pod):
                s.nominator.add(PodInfo(pod))

    def pod_updated(self, old: Obj, new: Obj) -> None:
        s = self.sched
        if _assigned(new):
            if not _assigned(old):
                s.queue.delete(old)  # bound (by this scheduler, confirmed now, or by another one)
                s.nominator.delete(_uid(new))
                s.cache.add_pod(new)
                s.queue.on_event(events.ASSIGNED_POD_ADD, None, new)
                return
            s.cache.update_pod(old, new)
            s.queue.on_event(events.pod_update_event(old, new), old, new)
        elif s.responsible_for(new):
            if _terminating(new):
                s.queue.delete(new)
                s.nominator.delete(_uid(new))
                s.reject_waiting(_uid(new), "pod is being deleted")
            elif not s.cache.is_assumed(_uid(new)):
                s.queue.update(old, new)
                s.nominator.update(old, new)
                # Its status alone (the PodScheduled=False this scheduler just wrote) changes nothing
                # another pod could be waiting for; as an event it would requeue every pod rejected by a
                # plugin that registered pod updates, after each failure (kube-scheduler's isPodUpdated).
                if not _status_only(old, new):
                    s.queue.on_event(events.UNSCHEDULED_POD_UPDATE, old, new)

    def pod_deleted(self, pod: Obj) -> None:
        s = self.sched
        uid = _uid(pod)
        s.forget_condition(uid)
        if _assigned(pod):
            s.cache.remove_pod(pod)
            s.queue.on_event(events.ASSIGNED_POD_DELETE, pod, None)
            return
        s.queue.delete(pod)
        s.nominator.delete(uid)
        s.reject_waiting(uid, "pod deleted")
        # Assumed, and deleted before its binding reached this cache (a re-list after 410 Gone reports
        # only the deletion, of the object last seen unbound): nothing else would ever free its room.
        node = s.cache.forget_pod(uid)
        if node:
            s.room_freed(pod, node)

    # ---- nodes ----------------------------------------------------------------------------------

    def node_added(self, node: Obj) -> None:
        self.sched.cache.add_node(node)
        self.sched.queue.on_event(events.NODE_ADD, None, node)

    def node_updated(self, old: Obj, new: Obj) -> None:
        self.sched.cache.update_node(old, new)
        event = events.node_update_event(old, new)
        if event is not None:
            self.sched.queue.on_event(event, old, new)

    def node_deleted(self, node: Obj) -> None:
        self.sched.cache.remove_node(node)
        self.sched.queue.on_event(events.NODE_DELETE, node, None)


def cache_events(queue: SchedulingQueue, kind: str) -> EventHandler:
    """Changes to a cache a plugin watches (PersistentVolumeClaims...) as ``<kind>`` cluster events for
    the queue (a resync, which changes nothing, is not one)."""
    added = ClusterEvent(kind, Action.ADD, f"{kind}Add")
    updated = ClusterEvent(kind, Action.UPDATE_OTHER, f"{kind}Update")
    deleted = ClusterEvent(kind, Action.DELETE, f"{kind}Delete")

    def on_add(obj: Obj) -> None:
        queue.on_event(added, None, obj)

    def on_update(old: Obj, new: Obj) -> None:
        if old is not new:
            queue.on_event(updated, old, new)

    def on_delete(obj: Obj) -> None:
        queue.on_event(deleted, obj, None)

    return EventHandler(on_add, on_update, on_delete)
