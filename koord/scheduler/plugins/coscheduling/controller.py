"""The PodGroup status controller (Koordinator's ``coscheduling/controller/podgroup.go``), run by
koord-scheduler while it leads: one status transition per look, merge-PATCHed, so a PodGroup walks
Pending -> PreScheduling -> Scheduling -> Scheduled -> Running, and ends Finished or Failed.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koord.scheduler.framework import SchedulerHandle, Store
from koord.scheduler.plugins.coscheduling.cache import StoreHandler
from koord.scheduler.plugins.coscheduling.gang import Obj
from koord.scheduler.plugins.coscheduling.keyed import KeyedController
from koordshared.apis.core.pod import as_map, pod_key
from koordshared.apis.extension.coscheduling import POD_GROUP_LABEL, PodGroupPhase
from koordshared.apis.meta import groups
from koordshared.apis.meta.quantity import format_time, parse_time

MAX_GC_SECONDS = 48 * 3600.0
POD_CACHE = "podgroup-pods"
"""The cache of the pods labelled with a PodGroup, whatever their phase."""
_FINAL = (PodGroupPhase.FINISHED.value, PodGroupPhase.FAILED.value)


def group_of(pod: Obj) -> str:
    """The PodGroup key (``namespace/name``) a pod's label names, or ``""``."""
    meta = as_map(pod, "metadata")
    name = as_map(meta, "labels").get(POD_GROUP_LABEL)
    return f"{meta.get('namespace') or ''}/{name}" if name else ""


def occupied_by(pod: Obj) -> str:
    meta = as_map(pod, "metadata")
    refs = meta.get("ownerReferences")
    ns = meta.get("namespace") or ""
    names = sorted(f"{ns}/{r.get('name')}" for r in refs or () if isinstance(r, Mapping))
    return ",".join(names)


def next_status(pg: Obj, pods: list[Obj], now: float) -> dict[str, Any]:
    """The PodGroup's status after one look (``syncHandler``), from its current status and its pods."""
    spec = as_map(pg, "spec")
    raw_min = spec.get("minMember", 0)
    min_member = raw_min if isinstance(raw_min, int) and not isinstance(raw_min, bool) else 0
    old = as_map(pg, "status")
    status = dict(old)
    phase = str(old.get("phase") or "")
    if not phase:
        status["phase"] = PodGroupPhase.PENDING.value
        return status
    if phase == PodGroupPhase.PENDING.value:
        if min_member > 0 and len(pods) >= min_member:
            status["phase"] = PodGroupPhase.PRE_SCHEDULING.value
            first = min(pods, key=pod_key)
            if occupied_by(first):
                status["occupiedBy"] = occupied_by(first)
        return status
    if not pods:
        status["phase"] = PodGroupPhase.PENDING.value
        return status
    phases = [str(as_map(p, "status").get("phase") or "") for p in pods]
    running, succeeded, failed = (phases.count(x) for x in ("Running", "Succeeded", "Failed"))
    scheduled = sum(1 for p in pods if as_map(p, "spec").get("nodeName"))
    status.update(running=running, succeeded=succeeded, failed=failed, scheduled=scheduled)
    status["phase"] = (PodGroupPhase.SCHEDULING if scheduled < min_member else PodGroupPhase.SCHEDULED).value
    if parse_time(old.get("scheduleStartTime")) is None:
        status["scheduleStartTime"] = format_time(now)
    if succeeded + running >= min_member and status["phase"] == PodGroupPhase.SCHEDULED.value:
        status["phase"] = PodGroupPhase.RUNNING.value
    if failed and failed + running + succeeded >= min_member:
        status["phase"] = PodGroupPhase.FAILED.value
    if succeeded >= min_member:
        status["phase"] = PodGroupPhase.FINISHED.value
    return status


def _settled(pg: Obj) -> bool:
    """Nothing more to do (``pgAdded``'s skips): a final phase, or scheduled long ago and not running."""
    status, spec = as_map(pg, "status"), as_map(pg, "spec")
    if status.get("phase") in _FINAL:
        return True
    start = parse_time(status.get("scheduleStartTime"))
    created = parse_time(as_map(pg, "metadata").get("creationTimestamp"))
    return (
        status.get("scheduled") == spec.get("minMember")
        and not status.get("running")
        and start is not None
        and created is not None
        and start - created > MAX_GC_SECONDS
    )


class PodGroupController(KeyedController):
    name = "PodGroupController"

    def __init__(self, handle: SchedulerHandle, pod_groups: Store) -> None:
        super().__init__(handle.now)
        self.handle = handle
        self.pod_groups = pod_groups
        self.pods = handle.watch(POD_CACHE, groups.PODS, label_selector=POD_GROUP_LABEL)
        self._members: dict[str, set[str]] = {}
        pod_groups.add_handler(StoreHandler(self._pg_changed, lambda _old, new: self._pg_changed(new)))
        self.pods.add_handler(StoreHandler(self._pod_changed, self._pod_updated, self._pod_deleted))

    def _pg_changed(self, pg: Obj) -> None:
        if not _settled(pg):
            self.enqueue(pod_key(pg))

    def _pod_changed(self, pod: Obj) -> None:
        key = group_of(pod)
        if not key:
            return
        with self._lock:
            self._members.setdefault(key, set()).add(pod_key(pod))
        self._poke(key)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        before = group_of(old)
        if before and before != group_of(new):
            self._pod_deleted(old)
        self._pod_changed(new)

    def _pod_deleted(self, pod: Obj) -> None:
        key = group_of(pod)
        if not key:
            return
        with self._lock:
            members = self._members.get(key)
            if members is not None:
                members.discard(pod_key(pod))
                if not members:
                    del self._members[key]
        self._poke(key)

    def _poke(self, key: str) -> None:
        pg = self.pod_groups.get(key)
        if pg is not None and not _settled(pg):
            self.enqueue(key)

    def reconcile(self, key: str) -> float | None:
        pg = self.pod_groups.get(key)
        if pg is None or _settled(pg):
            return None
        with self._lock:
            keys = sorted(self._members.get(key, ()))
        pods = [p for k in keys if (p := self.pods.get(k)) is not None and group_of(p) == key]
        old = as_map(pg, "status")
        new = next_status(pg, pods, self.handle.now())
        changed = {k: v for k, v in new.items() if old.get(k) != v}
        if not changed:
            return None
        namespace, name = key.split("/", 1)
        st = self.handle.patch_object(groups.PODGROUPS, namespace, name, {"status": changed})
        if st is not None:
            raise RuntimeError(f"status of PodGroup {key}: {st.message}")
        return None
