"""One gang's state in the gang cache (Koordinator's ``core/gang.go`` and ``ganggroup.go``): its spec, its
member pods by where they are (all children, pending, waiting at Permit, bound), and the state its gang
group shares (once resource-satisfied, the gangs with members waiting, the members being bound together).

Not thread-safe: the :class:`~.cache.GangCache` lock guards every gang.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord.scheduler.plugins.coscheduling.gangspec import GangSpec
from koordshared.apis.core.pod import pod_key
from koordshared.apis.extension.coscheduling import GangMode, MatchPolicy

Obj = Mapping[str, Any]


@dataclass(eq=False)
class GangGroupInfo:
    """What the gangs of one gang group share."""

    id: str
    once_satisfied: bool = False
    """A member of the group was bound once: irreversible (``OnceResourceSatisfied``)."""
    waiting_gangs: set[str] = field(default_factory=set)
    binding_members: frozenset[str] = frozenset()
    """UIDs of the members allowed together at Permit (``BindingMemberPods``), until they are bound."""

    def remove_waiting_gang(self, gang: str) -> None:
        self.waiting_gangs.discard(gang)
        if not self.waiting_gangs:
            self.binding_members = frozenset()


class Gang:
    def __init__(self, gang_id: str) -> None:
        self.id = gang_id
        self.spec: GangSpec | None = None
        self.error = ""
        """Why the gang is not defined (its first pod's ``min-available`` unreadable...)."""
        self.children: dict[str, Obj] = {}
        self.pending: dict[str, Obj] = {}
        self.waiting: dict[str, Obj] = {}
        """Members assumed and waiting at Permit (``WaitingForBindChildren``), by pod key."""
        self.waiting_since: dict[str, float] = {}
        self.bound: dict[str, Obj] = {}
        self.group_info = GangGroupInfo(gang_id)

    # ---- the spec ------------------------------------------------------------------------------

    @property
    def from_pod_group(self) -> bool:
        return self.spec is not None and self.spec.from_pod_group

    @property
    def min_member(self) -> int:
        return self.spec.min_member if self.spec else 0

    @property
    def mode(self) -> GangMode:
        return self.spec.mode if self.spec else GangMode.STRICT

    @property
    def match_policy(self) -> MatchPolicy:
        return self.spec.match_policy if self.spec else MatchPolicy.ONCE_SATISFIED

    @property
    def group(self) -> tuple[str, ...]:
        return self.spec.group if self.spec else (self.id,)

    @property
    def group_id(self) -> str:
        return self.spec.group_id if self.spec else self.id

    @property
    def wait_seconds(self) -> float:
        return self.spec.wait_seconds if self.spec else 0.0

    def satisfied_once(self) -> bool:
        """Once-satisfied gangs whose group was bound once pass every gang check."""
        return self.match_policy is MatchPolicy.ONCE_SATISFIED and self.group_info.once_satisfied

    # ---- members -------------------------------------------------------------------------------

    def set_child(self, pod: Obj) -> None:
        key = pod_key(pod)
        self.children[key] = pod
        if not (pod.get("spec") or {}).get("nodeName") and key not in self.waiting:
            self.pending[key] = pod

    def add_waiting(self, pod: Obj, now: float) -> None:
        key = pod_key(pod)
        if key not in self.waiting:
            self.waiting[key] = pod
            self.waiting_since[key] = now
        self.pending.pop(key, None)

    def remove_waiting(self, pod: Obj) -> bool:
        """The member left Permit without binding; back to pending while it is still a child."""
        key = pod_key(pod)
        if key not in self.waiting:
            return False
        del self.waiting[key]
        self.waiting_since.pop(key, None)
        if key in self.children:
            self.pending[key] = self.children[key]
        if not self.waiting:
            self.group_info.remove_waiting_gang(self.id)
        return True

    def add_bound(self, pod: Obj) -> None:
        key = pod_key(pod)
        self.waiting.pop(key, None)
        self.waiting_since.pop(key, None)
        if not self.waiting:
            self.group_info.remove_waiting_gang(self.id)
        self.pending.pop(key, None)
        self.bound[key] = pod
        self.group_info.once_satisfied = True

    def delete_pod(self, pod: Obj) -> bool:
        """Forget a deleted member; whether the gang is now empty and described by no PodGroup."""
        key = pod_key(pod)
        for members in (self.children, self.pending, self.bound):
            members.pop(key, None)
        if self.waiting.pop(key, None) is not None:
            self.waiting_since.pop(key, None)
            if not self.waiting:
                self.group_info.remove_waiting_gang(self.id)
        return not self.from_pod_group and not self.children

    def valid_for_permit(self) -> bool:
        """``isGangValidForPermit``: enough members wait (with bound ones for waiting-and-running; any
        once the group was satisfied for once-satisfied)."""
        if self.spec is None:
            return False
        need = self.spec.min_member
        if self.spec.match_policy is MatchPolicy.ONLY_WAITING:
            return len(self.waiting) >= need
        if self.spec.match_policy is MatchPolicy.WAITING_AND_RUNNING:
            return len(self.waiting) + len(self.bound) >= need
        return len(self.waiting) >= need or self.group_info.once_satisfied

    def worth_requeue(self) -> bool:
        return self.spec is not None and len(self.children) >= self.spec.min_member
