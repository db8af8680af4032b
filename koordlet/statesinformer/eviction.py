"""What the states informer offers the evictor: the Eviction API call and Events (statesinformer layer).

The informer is the agent's only API client, so the evictor (QoS manager layer, above) reaches the API
server through :class:`EvictionAPI`, and gets an :class:`EvictResult` back to switch on.
"""

from __future__ import annotations

import enum
from typing import Protocol

from koordlet import api


class EvictResult(enum.Enum):
    """What an eviction request came to."""

    EVICTED = "evicted"
    BLOCKED = "blocked"
    """429: a PodDisruptionBudget refused it; try again later."""
    GONE = "gone"
    """404: the pod is already gone."""
    CONFLICT = "conflict"
    """409: the UID precondition failed (a new pod of the same name)."""
    ERROR = "error"

    @property
    def done(self) -> bool:
        """The pod is out of the way: evicted now or already gone."""
        return self in (EvictResult.EVICTED, EvictResult.GONE)


class EvictionAPI(Protocol):
    """The API-server side of eviction (implemented by the states informer)."""

    def evict(self, pod: api.PodInfo, reason: str, message: str) -> EvictResult:
        """A policy/v1 Eviction of ``pod`` with a UID precondition."""
        ...

    def record_event(
        self, kind: str, namespace: str, name: str, uid: str, type_: str, reason: str, message: str, /
    ) -> object: ...
