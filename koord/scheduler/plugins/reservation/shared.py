"""What every profile's Reservation plugin shares in one koord-scheduler: the Reservation informer, the
reservation cache, the controller, and the reserve pods fed to the scheduler (Koordinator's
``frameworkext/eventhandlers/reservation_handler.go``):

- a pending reservation's reserve pod is queued (by the profile its ``template.spec.schedulerName``
  names); an available one's holds its room on its node as a bound pod does; a Succeeded, Failed or deleted
  one's is gone (its room free again);
- a reserve pod that could not be placed tells its reservation: a ``FailedScheduling`` Event and the
  Scheduled=False condition with the scheduler's message (a reservation that cannot be used as written,
  bad owners say, is queued too, so it is told why instead of waiting silently).
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import threading
import weakref
from types import SimpleNamespace
from typing import Any

from koord.scheduler.framework import Obj, SchedulerHandle, Status, Store
from koord.scheduler.plugins.reservation import status
from koord.scheduler.plugins.reservation.args import ReservationArgs
from koord.scheduler.plugins.reservation.cache import ReservationCache
from koord.scheduler.plugins.reservation.controller import ReservationController
from koordshared.apis.meta import groups
from koordshared.apis.scheduling import reservation as rsv
from koordshared.apis.scheduling.reservation import reservation_name, reserve_pod

_SHARED: weakref.WeakKeyDictionary[Any, Shared] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def shared_for(handle: SchedulerHandle, args: ReservationArgs) -> Shared:
    with _LOCK:
        found = _SHARED.get(handle)
        if found is None:
            found = _SHARED[handle] = Shared(handle, args)
        return found


def reference(r: Obj) -> dict[str, Any]:
    """The reservation as an Event regards it: naming its kind (an object that names none is taken for
    a pod), with its resourceVersion and the template's scheduler name (whose profile reports it)."""
    return {**r, "apiVersion": groups.RESERVATIONS.api_version, "kind": groups.RESERVATIONS.kind}


def virtual_pod(r: Obj) -> Obj | None:
    """The reserve pod the scheduler keeps for ``r`` now: pending, placed, or none (it is over)."""
    if rsv.is_available(r) or rsv.is_pending(r):
        return reserve_pod(r)
    return None


class Shared:
    def __init__(self, handle: SchedulerHandle, args: ReservationArgs) -> None:
        self.handle = handle
        self.args = args
        self.cache = ReservationCache()
        self.store: Store = handle.watch("reservations", groups.RESERVATIONS)
        self.controller = ReservationController(handle, self.store, args)
        self._reported: dict[str, str] = {}
        handle.on_pods(self._pod_added, self._pod_updated, self._pod_deleted)
        self.store.add_handler(
            SimpleNamespace(on_add=self._added, on_update=self._updated, on_delete=self._deleted)
        )
        handle.register_error_handler_filters(None, self._failed)

    # ---- the Reservation informer -----------------------------------------------------------------

    def _added(self, r: Obj) -> None:
        self.cache.reservation_changed(r)
        pod = virtual_pod(r)
        if pod is not None:
            self.handle.add_virtual_pod(pod)
        self.controller.enqueue(rsv.name_of(r))

    def _updated(self, old: Obj, new: Obj) -> None:
        if old is new:
            return
        self.cache.reservation_changed(new)
        before, after = virtual_pod(old), virtual_pod(new)
        if before is not None and after is not None and rsv.uid_of(old) == rsv.uid_of(new):
            self.handle.update_virtual_pod(before, after)
        else:
            if before is not None:
                self.handle.delete_virtual_pod(before)
            if after is not None:
                self.handle.add_virtual_pod(after)
        if rsv.node_of(new):
            self._reported.pop(rsv.uid_of(new), None)
        self.controller.enqueue(rsv.name_of(new))

    def _deleted(self, r: Obj) -> None:
        self.cache.reservation_deleted(r)
        self.handle.delete_virtual_pod(reserve_pod(r))
        self._reported.pop(rsv.uid_of(r), None)

    # ---- owners -------------------------------------------------------------------------------------

    def _pod_added(self, pod: Obj) -> None:
        self.cache.pod_changed(None, pod)
        self._owner_event(pod)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if old is new:
            return
        self.cache.pod_changed(old, new)
        self._owner_event(old)
        self._owner_event(new)

    def _pod_deleted(self, pod: Obj) -> None:
        self.cache.pod_deleted(pod)
        self._owner_event(pod)

    def _owner_event(self, pod: Obj) -> None:
        placed = rsv.allocated_of(pod)
        if placed is not None and placed[0] and (pod.get("spec") or {}).get("nodeName"):
            self.controller.enqueue(placed[0])

    # ---- a reserve pod that could not be placed ---------------------------------------------------------

    def _failed(self, pod: Obj, why: Status | Exception) -> bool:
        name = reservation_name(pod)
        r = self.store.get(name) if name else None
        if r is None:
            return False
        message = why.message if isinstance(why, Status) else str(why)
        uid = rsv.uid_of(r)
        if self._reported.get(uid) == message:
            return False
        self._reported[uid] = message
        self.handle.event(reference(r), "Warning", "FailedScheduling", message)
        patch = status.unschedulable(r, message, self.handle.now())
        if patch is not None and self.handle.patch_object(
            groups.RESERVATIONS, "", name, patch, subresource="status"
        ):
            self._reported.pop(uid, None)  # refused (a newer object): the next failure writes it again
        return False
