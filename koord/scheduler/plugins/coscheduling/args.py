"""``CoschedulingArgs``: Koordinator's fields and defaults (``SetDefaults_CoschedulingArgs``), read strictly
from the profile's ``pluginConfig[].args``.

Defaults: ``defaultTimeout`` 600 s (a gang's waiting time at Permit when it names none),
``controllerWorkers`` 1 (validated and kept; the PodGroup status controller here is one periodic sync, which
keeps up without more workers), ``defaultMatchPolicy`` once-satisfied,
``enablePreemption`` and ``awareNetworkTopology`` false, ``skipCheckScheduleCycle`` false (deprecated,
accepted and ignored: the schedule cycle it skipped is gone since Koordinator v1.7).
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koord.scheduler.framework import MAX_PERMIT_WAIT, InvalidArgs
from koordshared.apis.extension.coscheduling import MatchPolicy
from koordshared.apis.meta.quantity import format_duration
from koordshared.apis.meta.strictargs import decode

DEFAULT_TIMEOUT = 600.0
DEFAULT_CONTROLLER_WORKERS = 1

_FIELDS = {
    "defaultTimeout": "duration",
    "controllerWorkers": "int",
    "skipCheckScheduleCycle": "bool",
    "enablePreemption": "bool",
    "awareNetworkTopology": "bool",
    "defaultMatchPolicy": "str",
}


@dataclass(frozen=True, slots=True)
class CoschedulingArgs:
    default_timeout: float = DEFAULT_TIMEOUT
    """Seconds a gang waits at Permit for its members when it names no waiting time."""
    controller_workers: int = DEFAULT_CONTROLLER_WORKERS
    default_match_policy: MatchPolicy = MatchPolicy.ONCE_SATISFIED


def parse_args(raw: Mapping[str, Any] | None) -> CoschedulingArgs:
    """Decode, default and validate; :class:`InvalidArgs` names the first field in error."""
    v = decode(raw, _FIELDS)
    timeout = float(v.get("defaultTimeout", DEFAULT_TIMEOUT))
    if timeout > MAX_PERMIT_WAIT:
        raise InvalidArgs(
            f"defaultTimeout: {format_duration(timeout)} exceeds the {format_duration(MAX_PERMIT_WAIT)} a "
            "pod may wait at Permit (the framework's limit); gangs would be rejected at 15m whatever it says"
        )
    workers = v.get("controllerWorkers", DEFAULT_CONTROLLER_WORKERS)
    if workers < 1:
        raise InvalidArgs(f"controllerWorkers: must be at least 1, got {workers}")
    policy = v.get("defaultMatchPolicy", MatchPolicy.ONCE_SATISFIED.value)
    if policy not in MatchPolicy.__members__.values():
        raise InvalidArgs(
            f"defaultMatchPolicy: {policy!r} unknown; want one of {', '.join(m.value for m in MatchPolicy)}"
        )
    for flag, what in (
        ("enablePreemption", "job-level preemption"),
        ("awareNetworkTopology", "network-topology-aware placement"),
    ):
        if v.get(flag):
            raise InvalidArgs(f"{flag}: {what} is not supported by this koord-scheduler; leave it false")
    return CoschedulingArgs(
        default_timeout=timeout, controller_workers=workers, default_match_policy=MatchPolicy(policy)
    )
