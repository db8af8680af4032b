"""The reservation controller (Koordinator's ``reservation/controller``), run by koord-scheduler while it
leads, one reservation per key (queued by the informers: a reservation changed, an owner bound or gone, a
node deleted):

- past ``spec.expires``, or ``spec.ttl`` after its creation (``0s``: never), a reservation is Failed with
  Ready=False, reason Expired; so is an assigned one whose node is gone;
- an assigned one's ``currentOwners`` and ``allocated`` follow the bound pods that carry its
  ``reservation-allocated``; an allocate-once one is Succeeded once they change (its first owner);
- an Expired or Succeeded one is deleted ``gcDurationSeconds`` after it ended (at once when its node is
  gone), unless garbage collection is disabled.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

from koord.scheduler.framework import Obj, PodInfo, SchedulerHandle, Store
from koord.scheduler.framework.types import resources_of
from koord.scheduler.plugins.coscheduling.keyed import KeyedController
from koord.scheduler.plugins.reservation import status
from koord.scheduler.plugins.reservation.args import ReservationArgs
from koordshared.apis.core.pod import as_list, as_map
from koordshared.apis.meta import groups
from koordshared.apis.meta.quantity import parse_time
from koordshared.apis.scheduling import reservation as rsv
from koordshared.runtime.errors import InvalidValue

log = logging.getLogger(__name__)


class ReservationController(KeyedController):
    name = "reservation"

    def __init__(self, handle: SchedulerHandle, reservations: Store, args: ReservationArgs) -> None:
        super().__init__(handle.now)
        self.handle = handle
        self.reservations = reservations
        self.args = args
        nodes = handle.store("nodes")
        if nodes is not None:
            nodes.add_handler(SimpleNamespace(on_add=None, on_update=None, on_delete=self._node_deleted))

    def _node_deleted(self, node: Obj) -> None:
        name = str((node.get("metadata") or {}).get("name") or "")
        for r in self.reservations.objects():
            if rsv.node_of(r) == name:
                self.enqueue(rsv.name_of(r))

    def reconcile(self, key: str) -> float | None:
        r = self.reservations.get(key)
        if r is None:
            return None
        now = self.handle.now()
        if rsv.is_terminated(r):
            return self._collect(r, now)
        try:
            created = parse_time(as_map(r, "metadata").get("creationTimestamp")) or now
            expires = rsv.expires_at(r, created)
        except InvalidValue:
            expires = None  # the scheduler reports it on the reservation; nothing expires it
        node = rsv.node_of(r)
        if (expires is not None and now >= expires) or (node and self._node_gone(node)):
            self._write(r, status.expired(r, now))
            return None
        if node:
            self._sync_owners(r, node, now)
        return None if expires is None else expires - now

    def _node_gone(self, node: str) -> bool:
        nodes = self.handle.store("nodes")
        return nodes is not None and nodes.get(node) is None

    def _sync_owners(self, r: Obj, node: str, now: float) -> None:
        uid = rsv.uid_of(r)
        st = as_map(r, "status")
        held = set(as_map(st, "allocatable"))
        owners: list[dict[str, str]] = []
        allocated: dict[str, int] = {}
        for pod in self.handle.pods_on_node(node):
            placed = rsv.allocated_of(pod)
            if placed is None or placed[1] != uid:
                continue
            info = PodInfo(pod)
            owners.append({"namespace": info.namespace, "name": info.name, "uid": info.uid})
            for name, value in info.requests.items():
                if name in held:
                    allocated[name] = allocated.get(name, 0) + value
        owners.sort(key=lambda o: o["uid"])
        have = sorted(
            (
                {k: str(o.get(k) or "") for k in ("namespace", "name", "uid")}
                for o in as_list(st, "currentOwners")
                if isinstance(o, dict)
            ),
            key=lambda o: o["uid"],
        )
        if have == owners and resources_of(as_map(st, "allocated")) == allocated:
            return
        self._write(r, status.owners(r, owners, allocated, now))

    def _collect(self, r: Obj, now: float) -> float | None:
        if self.args.disable_gc or not (rsv.is_expired(r) or rsv.phase_of(r) == rsv.Phase.SUCCEEDED):
            return None
        node = rsv.node_of(r)
        ended = parse_time(status.ended_at(r))
        if not (node and self._node_gone(node)):
            if ended is None:
                return None
            left = ended + self.args.gc_duration - now
            if left > 0:
                return left
        st = self.handle.delete_object(groups.RESERVATIONS, "", rsv.name_of(r))
        if st is not None:
            raise RuntimeError(st.message)
        log.info("reservation %s garbage collected", rsv.name_of(r))
        return None

    def _write(self, r: Obj, patch: dict[str, object]) -> None:
        st = self.handle.patch_object(groups.RESERVATIONS, "", rsv.name_of(r), patch, subresource="status")
        if st is not None:
            raise RuntimeError(st.message)  # retried with a backoff, on the object the informer has then
