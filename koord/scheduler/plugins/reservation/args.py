"""``ReservationArgs``: Koordinator's fields and defaults (``SetDefaults_ReservationArgs``,
``ValidateReservationArgs``), read strictly from the profile's ``pluginConfig[].args``.

Defaults: ``enablePreemption`` false, ``minCandidateNodesPercentage`` 10, ``minCandidateNodesAbsolute`` 100
(kept for the preemption that is not ported), ``controllerWorkers`` 1, ``gcDurationSeconds`` 86400 (a
Succeeded or Expired reservation is deleted a day after it ended), ``gcIntervalSeconds`` 60,
``disableGarbageCollection`` false, ``resyncIntervalSeconds`` 60; 0 in the three seconds fields means the
default, as in Koordinator. ``ignoredResources`` (extended resource names) and ``ignoredResourceGroups``
(their prefixes) are left out of the reservation-aware fit checks. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koord.scheduler.framework import InvalidArgs
from koordshared.apis.meta.strictargs import decode

DEFAULT_GC_SECONDS = 86400
DEFAULT_GC_INTERVAL = 60
DEFAULT_RESYNC = 60

_FIELDS = {
    "enablePreemption": "bool",
    "minCandidateNodesPercentage": "int",
    "minCandidateNodesAbsolute": "int",
    "controllerWorkers": "int",
    "gcDurationSeconds": "int",
    "gcIntervalSeconds": "int",
    "disableGarbageCollection": "bool",
    "resyncIntervalSeconds": "int",
    "preAllocationConfig": "object",
    "ignoredResources": "str_list",
    "ignoredResourceGroups": "str_list",
    "reservationSelectorIndex": "object",
}
_INDEX_FIELDS = {"enabled": "bool", "keyPrefixes": "str_list", "keys": "str_list"}
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


@dataclass(frozen=True, slots=True)
class ReservationArgs:
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100
    controller_workers: int = 1
    gc_duration: float = float(DEFAULT_GC_SECONDS)
    gc_interval: float = float(DEFAULT_GC_INTERVAL)
    disable_gc: bool = False
    resync_interval: float = float(DEFAULT_RESYNC)
    ignored_resources: frozenset[str] = frozenset()
    ignored_groups: frozenset[str] = frozenset()

    def ignored(self, name: str) -> bool:
        """Left out of the reservation-aware fit checks (Koordinator's ``isResourceIgnored``)."""
        if name in self.ignored_resources:
            return True
        prefix, slash, _ = name.partition("/")
        return bool(slash) and bool(prefix) and prefix in self.ignored_groups


def is_extended_resource(name: str) -> bool:
    """Kubernetes' ``IsExtendedResourceName``: a qualified name outside ``kubernetes.io/`` that is not a
    native resource (those have no ``/``)."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, rest = name.partition("/")
    return (
        len(prefix) <= 253
        and bool(_SUBDOMAIN.match(prefix))
        and len(rest) <= 63
        and bool(_NAME.match(rest))
        and len("requests." + name) <= 253 + 64
    )


def parse_args(raw: Mapping[str, Any] | None) -> ReservationArgs:
    """Decode, default and validate; :class:`InvalidArgs` names the first field in error."""
    v = decode(raw, _FIELDS)
    if v.get("enablePreemption"):
        raise InvalidArgs("enablePreemption: reservation preemption is not supported by this koord-scheduler")
    if "preAllocationConfig" in v:
        raise InvalidArgs(
            "preAllocationConfig: reservation pre-allocation is not supported by this koord-scheduler"
        )
    percentage = v.get("minCandidateNodesPercentage", 10)
    if not 0 <= percentage <= 100:
        raise InvalidArgs(f"minCandidateNodesPercentage: must be in the range [0, 100], got {percentage}")
    for key in (
        "minCandidateNodesAbsolute",
        "gcDurationSeconds",
        "gcIntervalSeconds",
        "resyncIntervalSeconds",
    ):
        if v.get(key, 0) < 0:
            raise InvalidArgs(f"{key}: must be non-negative, got {v[key]}")
    workers = v.get("controllerWorkers", 1)
    if workers < 1:
        raise InvalidArgs(f"controllerWorkers: must be at least 1, got {workers}")
    for i, name in enumerate(v.get("ignoredResources", ())):
        if not is_extended_resource(name):
            raise InvalidArgs(
                f"ignoredResources[{i}]: {name!r} must be an extended resource name (e.g. example.com/gpu); "
                "native resources cannot be ignored"
            )
    for i, group in enumerate(v.get("ignoredResourceGroups", ())):
        if "/" in group:
            raise InvalidArgs(f"ignoredResourceGroups[{i}]: {group!r}: resource group name can't contain '/'")
        if not is_extended_resource(group + "/x"):
            raise InvalidArgs(
                f"ignoredResourceGroups[{i}]: {group!r} must be usable as an extended resource prefix "
                '(a valid DNS subdomain and not the reserved "kubernetes.io" namespace)'
            )
    if "reservationSelectorIndex" in v:
        decode(v["reservationSelectorIndex"], _INDEX_FIELDS, "reservationSelectorIndex.")
    return ReservationArgs(
        min_candidate_nodes_percentage=percentage,
        min_candidate_nodes_absolute=v.get("minCandidateNodesAbsolute", 100),
        controller_workers=workers,
        gc_duration=float(v.get("gcDurationSeconds") or DEFAULT_GC_SECONDS),
        gc_interval=float(v.get("gcIntervalSeconds") or DEFAULT_GC_INTERVAL),
        disable_gc=bool(v.get("disableGarbageCollection", False)),
        resync_interval=float(v.get("resyncIntervalSeconds") or DEFAULT_RESYNC),
        ignored_resources=frozenset(v.get("ignoredResources", ())),
        ignored_groups=frozenset(v.get("ignoredResourceGroups", ())),
    )
