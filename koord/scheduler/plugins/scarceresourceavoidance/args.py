"""``ScarceResourceAvoidanceArgs``: ``resources``, the resource names counted as scarce, read strictly
from the profile's ``pluginConfig[].args``. Koordinator sets no default (no scarce resource: every node
scores 100) and checks nothing; here a name must be a non-empty string and appear once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordshared.apis.meta.strictargs import decode
from koordshared.runtime.errors import InvalidArgs


@dataclass(frozen=True, slots=True)
class ScarceArgs:
    resources: frozenset[str] = frozenset()


def parse_args(raw: Mapping[str, Any] | None) -> ScarceArgs:
    """Decode and validate; :class:`InvalidArgs` names the first field in error."""
    names: tuple[str, ...] = decode(raw, {"resources": "str_list"}).get("resources", ())
    for i, name in enumerate(names):
        if not name:
            raise InvalidArgs(f"resources[{i}]: want a resource name, got an empty string")
        if name in names[:i]:
            raise InvalidArgs(f"resources[{i}]: duplicate resource {name!r}")
    return ScarceArgs(frozenset(names))
