"""The handle koord-scheduler gives its plugins (kube-scheduler's ``framework.Handle``): the snapshot of the
current cycle, the informer caches by name, change notifications, the clock, the API client, the waiting
pods, Events, the one merged PATCH of PreBind (DefaultPreBind), what preemption needs of the scheduler
(the profile's filters over what-if nodes, the nominated pods, victims' deletion, the queue, metrics), and
the writes of plugins' controllers (create or patch their own objects, such as a PodGroup's or an
ElasticQuota's status; evict a pod), the pods that exist only in the scheduler (a Reservation's reserve
pod), and a cycle's changed copy of a node (a reservation's room given back to its owner).

The scheduler attaches itself when it is built (:meth:`SchedulerHandle.attach`); changes to the caches
plugins asked for (:meth:`SchedulerHandle.watch`) then become cluster events for the queue when some
plugin registered events of that kind (PersistentVolumeClaim for VolumeBinding...)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from koord.scheduler.core.api import APIFailed, ClusterAPI
from koord.scheduler.core.eventhandlers import EventHandlers, SchedulerParts, cache_events
from koord.scheduler.framework.extension import ErrorHandler, FailureHooks, ForgetHandler
from koord.scheduler.framework.interface import (
    SCHEDULING,
    Code,
    CycleState,
    ObjHandler,
    Status,
    Store,
    UpdateHandler,
)
from koord.scheduler.framework.runtime import Framework
from koord.scheduler.framework.snapshot import Snapshot
from koord.scheduler.framework.types import NodeInfo, Obj, PodInfo
from koord.scheduler.framework.waiting import WaitingPod, WaitingPods
from koordshared.apis.meta import groups
from koordshared.apis.scheduling.reservation import reservation_name
from koordshared.kube.informer import EventHandler
from koordshared.kube.informers import Watch, cluster_watches
from koordshared.kube.trim import compact

PATCH_KEY = "koord.scheduler/prebind-patch"
"""Where PreBind plugins' metadata changes gather in the cycle state until DefaultPreBind sends them."""


def _send_patch(api: ClusterAPI, pod: Obj, patch: Mapping[str, Any]) -> None:
    """The merged PreBind PATCH onto the pod; a reserve pod's onto its Reservation (Koordinator's PreBind
    applies a reserve pod's patch to the reservation)."""
    reservation = reservation_name(pod)
    if reservation:
        api.patch_object(groups.RESERVATIONS, "", reservation, patch)
    else:
        api.patch_metadata(pod, patch)


def merge_patch(into: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """RFC 7386 merge of ``patch`` into ``into`` (nested objects merged, the rest replaced)."""
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            merge_patch(into[key], value)
        else:
            into[key] = dict(value) if isinstance(value, Mapping) else value


def _bound(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


class SchedulerHandle:
    def __init__(
        self,
        snapshot: Snapshot,
        informers: Any,
        api: ClusterAPI,
        waiting: WaitingPods,
        *,
        client: Any = None,
        clock: Callable[[], float] = time.time,
        hooks: FailureHooks | None = None,
    ) -> None:
        self._snapshot = snapshot
        self.hooks = hooks or FailureHooks()
        self.informers = informers
        """An :class:`~koordshared.kube.informers.InformerSet` (or its in-memory twin)."""
        self.api = api
        self.waiting = waiting
        self._client = client
        self._clock = clock
        self._watched: dict[str, groups.Resource] = {}
        self._scheduler: SchedulerParts | None = None
        self._early: list[tuple[Obj | None, Obj | None]] = []
        """Virtual pod changes (old, new) told before a scheduler attached, replayed when one does."""

    def attach(self, scheduler: SchedulerParts) -> None:
        """Serve ``scheduler`` (done by the scheduler itself): its profiles, queue, nominator and metrics
        back the preemption methods, and the caches plugins watch feed its queue."""
        if self._scheduler is scheduler:
            return
        self._scheduler = scheduler
        kinds = {
            reg.event.resource
            for plugins in scheduler.events().values()
            for registered in plugins.values()
            for reg in registered
        }
        for name, resource in self._watched.items():
            if resource.kind in kinds:
                self.informers[name].add_handler(cache_events(scheduler.queue, resource.kind))
        early, self._early = self._early, []
        for old, new in early:
            self._virtual(old, new)

    def _attached(self) -> SchedulerParts:
        if self._scheduler is None:
            raise RuntimeError("this handle serves no scheduler (the Scheduler attaches itself when built)")
        return self._scheduler

    def _framework(self, pod: Obj) -> Framework:
        fw = self._attached().framework_for(pod)
        if fw is None:
            raise RuntimeError(f"no profile schedules {PodInfo(pod).key}")
        return fw

    def watched(self, resource: groups.Resource) -> list[str]:
        """The names of the caches plugins asked for with :meth:`watch` that hold ``resource``."""
        return [name for name, r in self._watched.items() if r == resource]

    # ---- virtual pods -------------------------------------------------------------------------------

    def add_virtual_pod(self, pod: Obj) -> None:
        """A pod that exists only in the scheduler (Koordinator's reserve pod): pending, it is queued and
        scheduled as pods are; with ``spec.nodeName``, it holds its room in the cache as a bound pod."""
        self._virtual(None, pod)

    def update_virtual_pod(self, old: Obj, new: Obj) -> None:
        self._virtual(old, new)

    def delete_virtual_pod(self, pod: Obj) -> None:
        self._virtual(pod, None)

    def _virtual(self, old: Obj | None, new: Obj | None) -> None:
        """The change as the pods informer would tell it; told twice (several profiles' plugins feed the
        same pods), it counts once."""
        sched = self._scheduler
        if sched is None:
            self._early.append((old, new))
            return
        handlers = EventHandlers(sched)
        key = PodInfo(new if new is not None else old or {}).key
        current = sched.virtual_pods.get(key)
        if new is None:
            if current is None:
                return
            del sched.virtual_pods[key]
            handlers.pod_deleted(current)
            return
        if current == new:
            return
        sched.virtual_pods[key] = new
        if current is None:
            handlers.pod_added(new)
        elif _bound(current) and not _bound(new):  # back to pending: out of the cache, into the queue
            handlers.pod_deleted(current)
            handlers.pod_added(new)
        else:
            handlers.pod_updated(current, new)

    def replace_node_info(self, info: NodeInfo) -> None:
        """For the current cycle only, the snapshot's row of ``info.name`` is ``info`` (a plugin's changed
        copy: the room a reservation holds given back to its owner); the next cycle sees the cache's again."""
        self._snapshot.overlay(info)

    # ---- views --------------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        return self._snapshot

    def node_info(self, name: str) -> NodeInfo | None:
        return self._snapshot.node_info(name)

    def node_infos(self) -> Sequence[NodeInfo]:
        return self._snapshot.node_infos()

    def store(self, name: str) -> Store | None:
        try:
            store: Store = self.informers[name]
        except KeyError:
            return None
        return store

    def watch(
        self,
        name: str,
        resource: groups.Resource,
        *,
        field_selector: str = "",
        label_selector: str = "",
        namespace: str = "",
    ) -> Store:
        """A cache of ``resource`` called ``name`` (shared: the first caller creates it)."""
        watch = Watch(
            name, resource, field_selector, namespace, transform=compact, label_selector=label_selector
        )
        store: Store = self.informers.watch(watch)
        self._watched[name] = resource
        return store

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        pods = self.store("pods")
        return None if pods is None else pods.get(f"{namespace}/{name}" if namespace else name)

    def pods_on_node(self, node_name: str) -> list[Obj]:
        pods = self.store("pods")
        return [] if pods is None else list(pods.by_index("node", node_name))

    def node_metric(self, node_name: str) -> Obj | None:
        metrics = self.store("nodemetrics")
        return None if metrics is None else metrics.get(node_name)

    def _node_metrics(self) -> Store:
        metrics = cluster_watches(parse_node_metrics=True)[2]
        store: Store = self.informers.watch(metrics)
        return store

    def on_pods(
        self,
        on_add: ObjHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: ObjHandler | None = None,
    ) -> None:
        self.informers["pods"].add_handler(EventHandler(on_add, on_update, on_delete))

    def on_node_metrics(
        self,
        on_add: ObjHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: ObjHandler | None = None,
    ) -> None:
        self._node_metrics().add_handler(EventHandler(on_add, on_update, on_delete))

    def now(self) -> float:
        return self._clock()

    @property
    def client(self) -> Any:
        return self._client

    # ---- waiting pods ----------------------------------------------------------------------------

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self.waiting.get(uid)

    def iterate_waiting_pods(self, fn: Callable[[WaitingPod], None]) -> None:
        for wp in self.waiting.all():
            fn(wp)

    def reject_waiting_pod(self, uid: str, plugin: str, message: str) -> bool:
        wp = self.waiting.get(uid)
        if wp is None:
            return False
        wp.reject(plugin, message)
        return True

    # ---- FrameworkExtender hooks ------------------------------------------------------------------

    def register_error_handler_filters(self, pre: ErrorHandler | None, post: ErrorHandler | None) -> None:
        """Koordinator's ``RegisterErrorHandlerFilters``: ``pre(pod, why)`` returning True takes over a
        scheduling failure (the default requeue and report are skipped); ``post`` runs after."""
        if pre is not None:
            self.hooks.error_pre.append(pre)
        if post is not None:
            self.hooks.error_post.append(post)

    def register_forget_pod_handler(self, handler: ForgetHandler) -> None:
        """Koordinator's ``RegisterForgetPodHandler``: told when an assumed pod is forgotten."""
        self.hooks.forget.append(handler)

    # ---- writes --------------------------------------------------------------------------------

    def event(
        self,
        obj: Obj,
        type_: str,
        reason: str,
        message: str,
        *,
        action: str = SCHEDULING,
        related: Obj | None = None,
    ) -> None:
        self.api.event(obj, type_, reason, message, action=action, related=related)

    def bind_pod(self, pod: Obj, node: str) -> Status | None:
        try:
            self.api.bind(pod, node)
        except APIFailed as err:
            return Status.error(str(err))
        return None

    def apply_patch(self, state: CycleState, pod: Obj) -> Status | None:
        """Send the PreBind plugins' merged metadata PATCH, if there is one: DefaultPreBind's PreBind, and
        the scheduler's after PreBind when DefaultPreBind is not enabled (the one place it is sent)."""
        pending = state.get(PATCH_KEY)
        if not pending:
            return None
        state.delete(PATCH_KEY)  # sent at most once, by DefaultPreBind or after PreBind
        try:
            _send_patch(self.api, pod, pending)
        except APIFailed as err:
            return Status(Code.ERROR, (str(err),), "DefaultPreBind")
        return None

    def patch_pod(self, state: CycleState, patch: Mapping[str, Any]) -> None:
        pending = state.get(PATCH_KEY)
        if pending is None:
            pending = {}
            state.write(PATCH_KEY, pending)
        merge_patch(pending, patch)

    def delete_pod(self, pod: Obj) -> Status | None:
        sched = self._scheduler
        if sched is not None and PodInfo(pod).key in sched.virtual_pods:
            # A reserve pod chosen as a preemption victim: its reservation is not the victim's to end.
            return Status.error(f"{PodInfo(pod).key} exists only in the scheduler and cannot be deleted")
        try:
            self.api.delete_pod(pod)
        except APIFailed as err:
            return None if err.gone else Status.error(str(err))
        return None

    def update_pod_status(
        self, pod: Obj, condition: Mapping[str, Any] | None, nominated_node: str | None
    ) -> Status | None:
        try:
            self.api.patch_status(pod, condition, nominated_node)
        except APIFailed as err:
            return None if err.gone else Status.error(str(err))
        return None

    # ---- the scheduler's side: preemption --------------------------------------------------------

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod: Obj, node_info: NodeInfo
    ) -> Status | None:
        return self._framework(pod).filter_one(state, pod, node_info)

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: Obj, to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        return self._framework(pod).run_pre_filter_extension_add_pod(state, pod, to_add, node_info)

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: Obj, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        return self._framework(pod).run_pre_filter_extension_remove_pod(state, pod, to_remove, node_info)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return self._attached().nominator.pods_for_node(node_name)

    def activate(self, pods: Sequence[Obj]) -> None:
        self._attached().queue.activate([PodInfo.uid_of(p) for p in pods])

    def count_preemption_attempt(self) -> None:
        self._attached().metrics.preemption_attempts.inc()

    def observe_preemption_victims(self, victims: int) -> None:
        self._attached().metrics.preemption_victims.observe(victims)

    def ensure_object(self, resource: groups.Resource, obj: Obj) -> Status | None:
        try:
            self.api.create_object(resource, obj)
        except APIFailed as err:
            return None if err.conflict else Status.error(str(err))
        return None

    def patch_object(
        self,
        resource: groups.Resource,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        subresource: str = "",
    ) -> Status | None:
        try:
            self.api.patch_object(resource, namespace, name, patch, subresource=subresource)
        except APIFailed as err:
            return Status.error(str(err))
        return None

    def delete_object(self, resource: groups.Resource, namespace: str, name: str) -> Status | None:
        try:
            self.api.delete_object(resource, namespace, name)
        except APIFailed as err:
            return None if err.gone else Status.error(str(err))
        return None

    def evict_pod(self, pod: Obj) -> Status | None:
        try:
            self.api.evict_pod(pod)
        except APIFailed as err:
            return None if err.gone else Status.error(str(err))
        return None
