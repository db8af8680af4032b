"""The gang cache (Koordinator's ``core/gang_cache.go``): every gang the scheduler's pods and the PodGroups
describe, fed by the pod and PodGroup informers.

A pod joins the gang its label or annotation names (the gang is created on first sight); in the annotation
way its annotations define the gang if no earlier pod did. A PodGroup defines (and on update redefines) its
gang. A bound pod counts as bound and marks its gang group once satisfied (a restarted scheduler finds
running gangs that way). Gangs of the annotation way go when their last pod goes; PodGroup gangs with
their PodGroup. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from koord.scheduler.plugins.coscheduling import gangspec
from koord.scheduler.plugins.coscheduling.args import CoschedulingArgs
from koord.scheduler.plugins.coscheduling.gang import Gang, GangGroupInfo, Obj
from koordshared.apis.extension.coscheduling import gang_id, gang_name, in_pod_group


@dataclass(frozen=True, slots=True)
class StoreHandler:
    """The handler a plugin gives a cache it watched (``Store.add_handler``): add, update, delete."""

    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj], None] | None = None


@dataclass(frozen=True, slots=True)
class Joined:
    """What a handler asks of the plugin: ``activate`` these pods; report ``problems`` on ``pod``."""

    gang: str
    pod: Obj | None = None
    activate: tuple[Obj, ...] = ()
    problems: tuple[str, ...] = ()


def terminated(pod: Obj) -> bool:
    return str((pod.get("status") or {}).get("phase") or "") in ("Succeeded", "Failed")


def _namespace_name(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class GangCache:
    def __init__(self, args: CoschedulingArgs) -> None:
        self.args = args
        self.lock = threading.RLock()
        """Guards every gang and group; the plugin holds it across a decision (never while calling into
        the queue or the waiting pods)."""
        self._gangs: dict[str, Gang] = {}
        self._groups: dict[str, GangGroupInfo] = {}
        self._linked: set[str] = set()

    # ---- lookups (hold the lock) ---------------------------------------------------------------

    def get(self, gid: str) -> Gang | None:
        return self._gangs.get(gid)

    def of_pod(self, pod: Obj) -> Gang | None:
        name = gang_name(pod)
        if not name:
            return None
        return self._gangs.get(gang_id(_namespace_name(pod)[0], name))

    def gangs(self) -> Iterator[Gang]:
        return iter(list(self._gangs.values()))

    def _ensure(self, gid: str) -> Gang:
        gang = self._gangs.get(gid)
        if gang is None:
            gang = self._gangs[gid] = Gang(gid)
        return gang

    def _link_group(self, gang: Gang) -> None:
        """Share the gang group's info (once, as ``SetGangGroupInfo``); a bound member seen before the
        gang was defined still counts."""
        if gang.spec is None or gang.id in self._linked:
            return
        info = self._groups.get(gang.group_id)
        if info is None:
            info = self._groups[gang.group_id] = GangGroupInfo(gang.group_id)
        info.once_satisfied |= gang.group_info.once_satisfied
        gang.group_info = info
        self._linked.add(gang.id)

    def _pending_of_group(self, gang: Gang) -> tuple[Obj, ...]:
        """The group's pending members, to re-check at PreEnqueue now that ``gang`` is complete (its pods
        and those of the other gangs were held while it was not)."""
        return tuple(p for gid in gang.group if (g := self._gangs.get(gid)) for p in g.pending.values())

    def _forget(self, gang: Gang) -> None:
        self._gangs.pop(gang.id, None)
        self._linked.discard(gang.id)
        if not any(g in self._gangs for g in gang.group):
            self._groups.pop(gang.group_id, None)

    # ---- pods ----------------------------------------------------------------------------------

    def pod_added(self, pod: Obj, *, created: bool = True) -> Joined | None:
        name = gang_name(pod)
        if not name:
            return None
        gid = gang_id(_namespace_name(pod)[0], name)
        with self.lock:
            gang = self._ensure(gid)
            before = gang.worth_requeue()
            if not in_pod_group(pod) and gang.spec is None:
                try:
                    gang.spec = gangspec.from_pod(pod, gid, self.args)
                    gang.error = ""
                except gangspec.BadGang as err:
                    gang.error = f"pod {gid.split('/', 1)[0]}/{_namespace_name(pod)[1]}: {err}"
                self._link_group(gang)
            gang.set_child(pod)
            if (pod.get("spec") or {}).get("nodeName"):
                gang.add_bound(pod)
            activate = self._pending_of_group(gang) if gang.worth_requeue() and not before else ()
            problems = gang.spec.problems if gang.spec is not None else ()
        return Joined(gid, pod, activate, problems if created else ())

    def pod_updated(self, old: Obj, new: Obj) -> Joined | None:
        if terminated(new):
            return None
        return self.pod_added(new, created=False)

    def pod_deleted(self, pod: Obj) -> None:
        name = gang_name(pod)
        if not name:
            return
        with self.lock:
            gang = self._gangs.get(gang_id(_namespace_name(pod)[0], name))
            if gang is not None and gang.delete_pod(pod):
                self._forget(gang)

    # ---- PodGroups -----------------------------------------------------------------------------

    def pod_group_added(self, pg: Obj) -> Joined:
        gid = gang_id(*_namespace_name(pg))
        with self.lock:
            gang = self._ensure(gid)
            before = gang.worth_requeue()
            gang.spec = gangspec.from_pod_group(pg, gid, self.args)
            gang.error = ""
            self._link_group(gang)
            activate = self._pending_of_group(gang) if gang.worth_requeue() and not before else ()
            return Joined(gid, None, activate, gang.spec.problems)

    def pod_group_deleted(self, pg: Obj) -> None:
        with self.lock:
            gang = self._gangs.get(gang_id(*_namespace_name(pg)))
            if gang is not None:
                gang.group_info.remove_waiting_gang(gang.id)
                self._forget(gang)
