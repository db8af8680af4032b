"""The reservation cache (Koordinator's ``reservationCache``): the available reservations by node, each with
the owners placed in it, kept from the Reservation informer, the pods informer (bound pods that carry
``reservation-allocated``) and the plugin's own Reserve/Unreserve (an owner counts in its reservation from
Reserve on, before its binding is confirmed).

Entries are :class:`ReservationInfo` values, replaced on every change. One cache serves every profile of
the process (Koordinator keeps one per profile, so two profiles could place owners in the same room).
Owners seen before their reservation (informers sync in any order) are kept aside and counted when it
arrives.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from koord.scheduler.framework import Obj, PodInfo, PodRequirement, ReservationInfo
from koordshared.apis.scheduling import reservation as rsv


def _assigned(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


class ReservationCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._infos: dict[str, ReservationInfo] = {}
        self._on_node: dict[str, dict[str, None]] = {}
        """Node -> the UIDs of its reservations, in the order they came."""
        self._owner_of: dict[str, str] = {}
        """Pod UID -> the reservation UID it is counted in."""
        self._early: dict[str, dict[str, PodRequirement]] = {}
        """Reservation UID -> owners seen while it was not cached."""
        self._tuples: dict[str, tuple[ReservationInfo, ...]] = {}
        """Node -> its reservations' infos as :meth:`by_node` last gave them, but for the nodes in
        ``_dirty`` (changed since): only those are gathered again."""
        self._dirty: set[str] = set()
        self._view: dict[str, tuple[ReservationInfo, ...]] = {}
        """What :meth:`by_node` last gave: given again while no node changed."""
        self._generation = 0
        self._changed: dict[str, int] = {}
        """Node -> the generation of its last change, the least recently changed first: which nodes
        changed since a generation costs what changed since, not a look at every node."""
        self._forgotten = 0
        """Changes up to this generation were dropped from ``_changed``."""
        self._moved = False
        """Nodes came to ``_on_node`` or left it since :meth:`by_node` last looked (the order it gives
        them in is made again)."""

    # ---- reservations -------------------------------------------------------------------------------

    def reservation_changed(self, r: Obj) -> None:
        """An available reservation is cached (its owners kept); any other leaves the cache."""
        uid = rsv.uid_of(r)
        with self._lock:
            old = self._infos.get(uid)
            if not rsv.is_available(r):
                self._drop(uid)
                return
            early = self._early.pop(uid, {})
            if old is None:
                info = ReservationInfo.of(r, tuple(early.values()))
            else:
                info = old.with_reservation(r)
                for owner in early.values():
                    info = info.with_pod(owner)
                if old.node_name != info.node_name:
                    self._leave(old.node_name, uid)
                    self._moved = True
                    self._mark(old.node_name)
            for pod_uid in info.assigned_pods:
                self._owner_of[pod_uid] = uid
            self._infos[uid] = info
            self._on_node.setdefault(info.node_name, {})[uid] = None
            self._mark(info.node_name)

    def reservation_deleted(self, r: Obj) -> None:
        with self._lock:
            self._drop(rsv.uid_of(r))
            self._early.pop(rsv.uid_of(r), None)

    def _drop(self, uid: str) -> None:
        info = self._infos.pop(uid, None)
        if info is None:
            return
        self._mark(info.node_name)
        self._leave(info.node_name, uid)
        for owner in info.assigned_pods:
            if self._owner_of.get(owner) == uid:
                del self._owner_of[owner]

    def _leave(self, node: str, uid: str) -> None:
        """``uid`` off ``node``; a node left without reservations leaves the map (:meth:`nodes`)."""
        on_node = self._on_node.get(node)
        if on_node is not None:
            on_node.pop(uid, None)
            if not on_node:
                del self._on_node[node]
                self._moved = True

    # ---- owners -------------------------------------------------------------------------------------

    def pod_changed(self, old: Obj | None, pod: Obj) -> None:
        """A pod from the informer: bound with ``reservation-allocated``, it counts in that reservation
        (and in no other). A pending pod changes nothing (an owner being bound stays counted from its
        Reserve on), unless it was bound before (another scheduler's pod unassigned)."""
        if not _assigned(pod):
            if old is not None and _assigned(old):
                self.pod_deleted(old)
            return
        info = PodInfo(pod)
        allocated = rsv.allocated_of(pod)
        with self._lock:
            current = self._owner_of.get(info.uid)
            wanted = allocated[1] if allocated is not None else None
            if current is not None and current != wanted:
                self._remove_owner(current, info.uid)
            if wanted is None:
                return
            if wanted in self._infos:
                self._set(wanted, self._infos[wanted].with_pod(PodRequirement.of(info)))
                self._owner_of[info.uid] = wanted
            else:
                self._early.setdefault(wanted, {})[info.uid] = PodRequirement.of(info)

    def pod_deleted(self, pod: Obj) -> None:
        uid = PodInfo.uid_of(pod)
        allocated = rsv.allocated_of(pod)
        with self._lock:
            current = self._owner_of.get(uid)
            if current is not None:
                self._remove_owner(current, uid)
            if allocated is not None:
                self._early.get(allocated[1], {}).pop(uid, None)

    def assume(self, reservation_uid: str, owner: PodRequirement) -> ReservationInfo | str:
        """Count ``owner`` in the reservation now (Reserve): the reservation as it is then, or why not."""
        with self._lock:
            info = self._infos.get(reservation_uid)
            if info is None:
                return "cannot find target reservation"
            if info.is_terminating:
                return "target reservation is terminating"
            info = info.with_pod(owner)
            self._set(reservation_uid, info)
            self._owner_of[owner.uid] = reservation_uid
            return info

    def forget(self, reservation_uid: str, pod_uid: str) -> None:
        """Undo :meth:`assume` (Unreserve)."""
        with self._lock:
            if self._owner_of.get(pod_uid) == reservation_uid:
                self._remove_owner(reservation_uid, pod_uid)

    def _remove_owner(self, reservation_uid: str, pod_uid: str) -> None:
        self._owner_of.pop(pod_uid, None)
        info = self._infos.get(reservation_uid)
        if info is not None:
            self._set(reservation_uid, info.without_pod(pod_uid))

    def _set(self, uid: str, info: ReservationInfo) -> None:
        """A cached reservation's new info (same node)."""
        self._infos[uid] = info
        self._mark(info.node_name)

    def _mark(self, node: str) -> None:
        """``node``'s reservations changed (under the lock)."""
        self._dirty.add(node)
        self._generation += 1
        self._changed.pop(node, None)
        self._changed[node] = self._generation
        if len(self._changed) > 2 * max(len(self._on_node), 64):
            for old in list(self._changed)[: len(self._changed) // 2]:
                self._forgotten = self._changed.pop(old)  # nodes long without reservations

    # ---- reading ------------------------------------------------------------------------------------

    def nodes(self) -> list[str]:
        """The nodes with available reservations."""
        with self._lock:
            return list(self._on_node)

    def reservation_of(self, pod_uid: str) -> str | None:
        """The UID of the reservation the pod is counted in."""
        with self._lock:
            return self._owner_of.get(pod_uid)

    def by_node(self) -> Mapping[str, tuple[ReservationInfo, ...]]:
        """The available reservations of every node that has some (one look under the lock; only the
        nodes changed since the last look are gathered again). Not to be changed: it is given again."""
        return self.by_node_since(self._generation)[0]

    def by_node_since(
        self, generation: int
    ) -> tuple[Mapping[str, tuple[ReservationInfo, ...]], int, set[str] | None]:
        """:meth:`by_node`, the generation it is of, and the nodes whose reservations changed since
        ``generation`` (an earlier answer's; ``None`` when that is too long ago to tell)."""
        with self._lock:
            if self._dirty:
                infos, tuples = self._infos, self._tuples
                for node in self._dirty:
                    uids = self._on_node.get(node)
                    if uids is None:
                        tuples.pop(node, None)
                    else:
                        tuples[node] = tuple(infos[uid] for uid in uids)
                view = dict(self._view)  # a new one: the last stays as it was given
                for node in self._dirty:
                    if node in view and node in tuples:
                        view[node] = tuples[node]
                    else:
                        self._moved = True
                if self._moved:  # nodes came or went: in the order they came again
                    view = {node: tuples[node] for node in self._on_node}
                    self._moved = False
                self._dirty.clear()
                self._view = view
            changed: set[str] | None = None
            if generation >= self._forgotten:
                changed = set()
                for node, at in reversed(self._changed.items()):
                    if at <= generation:
                        break
                    changed.add(node)
            return self._view, self._generation, changed

    def on_node(self, node: str) -> list[ReservationInfo]:
        """The available reservations on ``node``."""
        with self._lock:
            return [self._infos[uid] for uid in self._on_node.get(node, ())]
