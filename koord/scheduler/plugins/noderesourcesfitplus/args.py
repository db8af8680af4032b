"""``NodeResourcesFitPlusArgs``: ``resources``, a map of resource name -> ``{type, weight}``, read strictly
from the profile's ``pluginConfig[].args``.

Koordinator sets no default (no resources: every node scores 100) and checks nothing. Stricter here, so a
typo does not turn into a silent score of 0: ``type`` must be ``LeastAllocated`` or ``MostAllocated``
(Koordinator scores any other type 0 with its weight still counted) and ``weight`` an integer in
[1, 100], the range kube-scheduler allows a scoring resource (Koordinator takes any integer).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordshared.apis.meta.strictargs import decode
from koordshared.runtime.errors import InvalidArgs

LEAST, MOST = "LeastAllocated", "MostAllocated"


@dataclass(frozen=True, slots=True)
class ResourceType:
    """How one resource is scored (Koordinator's ``ResourcesType``)."""

    type: str
    weight: int


@dataclass(frozen=True, slots=True)
class FitPlusArgs:
    resources: Mapping[str, ResourceType]


def parse_args(raw: Mapping[str, Any] | None) -> FitPlusArgs:
    """Decode and validate; :class:`InvalidArgs` names the first field in error."""
    v = decode(raw, {"resources": "object"})
    out: dict[str, ResourceType] = {}
    for name, spec in (v.get("resources") or {}).items():
        at = f"resources[{name}]."
        s = decode(spec, {"type": "str", "weight": "int"}, at) if spec is not None else {}
        kind = s.get("type", "")
        if kind not in (LEAST, MOST):
            raise InvalidArgs(f"{at}type: {kind!r} is not one of {LEAST}, {MOST}")
        weight = s.get("weight", 0)
        if not 1 <= weight <= 100:
            raise InvalidArgs(f"{at}weight: {weight} must be in the range [1, 100]")
        out[str(name)] = ResourceType(kind, weight)
    return FitPlusArgs(out)
