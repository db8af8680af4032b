"""``PodTopologySpreadArgs`` with kube-scheduler's v1 defaulting and validation
(``apis/config/v1/defaults.go`` ``SetDefaults_PodTopologySpreadArgs``,
``validation/validation_pluginargs.go`` ``ValidatePodTopologySpreadArgs``).

``defaultingType`` is ``System`` unless set: the built-in default constraints (hostname, maxSkew 3;
zone, maxSkew 5; both ScheduleAnyway) apply and ``defaultConstraints`` must stay empty. With ``List``,
``defaultConstraints`` are the defaults (possibly none). A default constraint may not carry a
``labelSelector`` (it is derived per pod), needs ``maxSkew`` > 0, a topology key that is a label name
and ``whenUnsatisfiable`` DoNotSchedule or ScheduleAnyway, and no two share a key and an action.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordshared.apis.meta.strictargs import InvalidArgs, decode

NAME = "PodTopologySpread"
NAME_PREFIX = NAME + "/"
"""Cycle-state keys and snapshot columns of this plugin start with it."""
SYSTEM, LIST = "System", "List"
DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"
HONOR, IGNORE = "Honor", "Ignore"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"

SYSTEM_DEFAULT_CONSTRAINTS: tuple[Mapping[str, Any], ...] = (
    {"maxSkew": 3, "topologyKey": HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY},
    {"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY},
)
"""kube-scheduler's ``systemDefaultConstraints``."""

CONSTRAINT_FIELDS = {
    "maxSkew": "int",
    "topologyKey": "str",
    "whenUnsatisfiable": "str",
    "labelSelector": "object",
    "minDomains": "int",
    "nodeAffinityPolicy": "str",
    "nodeTaintsPolicy": "str",
    "matchLabelKeys": "str_list",
}
"""``TopologySpreadConstraint``'s fields and their JSON kinds."""

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def is_label_name(key: str) -> bool:
    """A qualified name (``[prefix/]name``), as ``ValidateLabelName`` accepts."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _PREFIX.match(prefix)):
        return False
    return bool(_NAME.match(name))


@dataclass(frozen=True, slots=True)
class SpreadArgs:
    defaulting_type: str = SYSTEM
    default_constraints: tuple[Mapping[str, Any], ...] = ()

    @property
    def system_defaulted(self) -> bool:
        return self.defaulting_type == SYSTEM

    @property
    def defaults(self) -> tuple[Mapping[str, Any], ...]:
        """The constraints a pod without its own gets (before its selector is derived)."""
        return SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else self.default_constraints


def parse_args(raw: Mapping[str, Any] | None) -> SpreadArgs:
    fields = decode(raw, {"defaultConstraints": "object_list", "defaultingType": "str"})
    defaulting = fields.get("defaultingType") or SYSTEM
    constraints = tuple(fields.get("defaultConstraints") or ())
    if defaulting not in (SYSTEM, LIST):
        raise InvalidArgs(f"defaultingType: Unsupported value {defaulting!r}: supported values: System, List")
    if defaulting == SYSTEM and constraints:
        raise InvalidArgs('defaultingType: Invalid value "System": when .defaultConstraints are not empty')
    seen: set[tuple[str, str]] = set()
    out = []
    for i, c in enumerate(constraints):
        at = f"defaultConstraints[{i}]"
        checked = decode(c, CONSTRAINT_FIELDS, f"{at}.")
        skew = checked.get("maxSkew", 0)
        if skew <= 0:
            raise InvalidArgs(f"{at}.maxSkew: Invalid value {skew}: not in valid range (0, inf)")
        key = checked.get("topologyKey", "")
        if not key:
            raise InvalidArgs(f"{at}.topologyKey: Required value: can not be empty")
        if not is_label_name(key):
            raise InvalidArgs(f"{at}.topologyKey: Invalid value {key!r}: not a qualified label name")
        action = checked.get("whenUnsatisfiable", "")
        if action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise InvalidArgs(
                f"{at}.whenUnsatisfiable: Unsupported value {action!r}: supported values: "
                f"{DO_NOT_SCHEDULE}, {SCHEDULE_ANYWAY}"
            )
        if "labelSelector" in checked:
            raise InvalidArgs(
                f"{at}.labelSelector: Forbidden: constraint must not define a selector, "
                "as they deduced for each pod"
            )
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            if checked.get(policy, HONOR) not in (HONOR, IGNORE):
                raise InvalidArgs(
                    f"{at}.{policy}: Unsupported value {checked[policy]!r}: supported values: Honor, Ignore"
                )
        if checked.get("minDomains", 1) <= 0:
            raise InvalidArgs(
                f"{at}.minDomains: Invalid value {checked['minDomains']}: must be greater than 0"
            )
        if (key, action) in seen:
            raise InvalidArgs(f"defaultConstraints[{i}]: Duplicate value: {{{key}, {action}}}")
        seen.add((key, action))
        out.append(dict(c))
    return SpreadArgs(defaulting, tuple(out))
