"""``SchedulingHintArgs``: ``maxHintNodes``, how many preferred nodes are tried at most (Koordinator's
default 100; it must be positive, as ``ValidateSchedulingHintArgs`` requires)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordshared.apis.meta.strictargs import decode
from koordshared.runtime.errors import InvalidArgs

DEFAULT_MAX_HINT_NODES = 100
MAX_INT32 = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SchedulingHintArgs:
    max_hint_nodes: int = DEFAULT_MAX_HINT_NODES


def parse_args(raw: Mapping[str, Any] | None) -> SchedulingHintArgs:
    """Decode, default and validate; :class:`InvalidArgs` names the field in error."""
    value = decode(raw, {"maxHintNodes": "int"}).get("maxHintNodes", DEFAULT_MAX_HINT_NODES)
    if value <= 0:
        raise InvalidArgs(f"maxHintNodes: must be a positive value, got {value}")
    if value > MAX_INT32:
        raise InvalidArgs(f"maxHintNodes: {value} does not fit an int32")
    return SchedulingHintArgs(value)
