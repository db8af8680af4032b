"""Graceful deletion and finalizers: what a DELETE does to an object before (or instead of) removing it.

Mirrors ``rest.BeforeDelete`` (``apiserver/pkg/registry/rest/delete.go``) and the generic store's
``Delete``/``updateForGracefulDeletionAndFinalizers``/``markAsDeleting`` (``registry/generic/registry/
store.go``). A type with a graceful strategy (pods: ``CheckGracefulDelete`` in ``pkg/registry/core/pod/
strategy.go``) gets ``deletionTimestamp = now + grace`` and ``deletionGracePeriodSeconds`` written first (a
MODIFIED event); it is removed at once only when the grace period is 0 and no finalizer is left, else it
waits for a later delete with grace 0 (the kubelet's confirmation). A second delete may only shorten the
grace period. A type without graceful deletion is removed at once unless it has finalizers, which mark it
deleting (grace 0) and hold it until an update empties them (``ShouldDeleteDuringUpdate``).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
from typing import Any

Obj = dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """``write``: the object to store first (None: nothing to write); ``remove``: then delete it."""

    write: Obj | None
    remove: bool
    pending: bool = False  # a graceful deletion already under way that this request does not shorten


def _format(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _bump_generation(meta: Obj) -> None:
    if int(meta.get("generation") or 0) > 0:
        meta["generation"] = int(meta["generation"]) + 1


def plan(old: Obj, grace: int | None, requested: int | None, now: float) -> Plan:
    """What deleting ``old`` does. ``grace`` is the type's graceful period for this request (None when the
    type has no graceful deletion); ``requested`` is DeleteOptions.gracePeriodSeconds."""
    if requested is not None and requested < 0:
        requested = 1
    new = copy.deepcopy(old)
    meta = new["metadata"]
    finalizers = bool(meta.get("finalizers"))
    period: int | None = None
    if meta.get("deletionTimestamp"):
        current = meta.get("deletionGracePeriodSeconds")
        if current:
            if requested is None or requested >= current:
                return Plan(None, False, pending=True)
            meta["deletionTimestamp"] = _format(_parse(meta["deletionTimestamp"]) - current + requested)
            meta["deletionGracePeriodSeconds"] = period = requested
    elif grace is not None:
        period = max(grace, 0)
        meta["deletionTimestamp"] = _format(now + period)
        meta["deletionGracePeriodSeconds"] = period
        _bump_generation(meta)
    if period is None:  # not graceful: finalizers hold the object, else it goes now
        if not finalizers:
            return Plan(None, True)
        if not meta.get("deletionTimestamp"):
            _bump_generation(meta)
        if not meta.get("deletionTimestamp") or _parse(meta["deletionTimestamp"]) > now:
            meta["deletionTimestamp"] = _format(now)
        meta["deletionGracePeriodSeconds"] = 0
        return Plan(new, False)
    return Plan(new, remove=not finalizers and period == 0)


def emptied(new: Obj) -> bool:
    """``ShouldDeleteDuringUpdate``: an update left a deleting object with grace 0 and no finalizers."""
    meta = new["metadata"]
    return (
        bool(meta.get("deletionTimestamp"))
        and meta.get("deletionGracePeriodSeconds") == 0
        and not meta.get("finalizers")
    )
