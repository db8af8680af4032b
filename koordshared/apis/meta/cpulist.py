"""The kernel's cpu-list syntax (``cpuset.cpus``, the online CPU list): one parser and one formatter.

The agent and the plugins both use these two functions, so a list the agent writes always parses the same
way a plugin reads it back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from koordshared.runtime.errors import InvalidValue

# The kernel's bitmap_parselist also takes "a-b:stride/group"; koordlet never writes it, so refuse it.
_ITEM = re.compile(r"^(\d{1,6})(?:-(\d{1,6}))?\Z")

MAX_CPU_ID = 65535
"""Above any NR_CPUS a kernel is built with (8192 on common distributions); bounds parse cost."""


def parse_cpuset(text: str, *, resource: str = "cpuset.cpus") -> frozenset[int]:
    """``"0-3,8"`` -> ``{0, 1, 2, 3, 8}``; an empty (or blank) list is the empty set.

    Raises :class:`InvalidValue` on bad syntax, a reversed range or an id above :data:`MAX_CPU_ID`.
    """
    stripped = text.strip()
    if not stripped:
        return frozenset()
    cpus: set[int] = set()
    for item in stripped.split(","):
        m = _ITEM.match(item.strip())
        if m is None:
            raise InvalidValue(resource, text, f"bad cpu list item {item!r}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise InvalidValue(resource, text, f"reversed range {item!r}")
        if hi > MAX_CPU_ID:
            raise InvalidValue(resource, text, f"cpu id {hi} above {MAX_CPU_ID}")
        cpus.update(range(lo, hi + 1))
    return frozenset(cpus)


def format_cpuset(cpus: Iterable[int]) -> str:
    """Canonical kernel form: ascending, consecutive ids collapsed into ``a-b``, e.g. ``"0-3,8"``."""
    ordered = sorted(set(cpus))
    if ordered and ordered[0] < 0:
        raise ValueError(f"negative cpu id {ordered[0]}")
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)
