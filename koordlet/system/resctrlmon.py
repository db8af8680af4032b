"""resctrl monitoring (Intel CMT/MBM, AMD QoS monitoring): LLC occupancy and memory bandwidth per group.

Layer: ``koordlet.system``; reads only. Each control group has ``mon_data/mon_L3_<cache id>/`` with
``llc_occupancy`` (bytes of L3 the group holds now), ``mbm_total_bytes`` and ``mbm_local_bytes`` (bytes
moved to/from memory since the group was made, all / local NUMA node; the kernel widens the hardware
counters, so they only grow). A file reads ``Unavailable`` while the hardware has no RMID for the group:
that is a missing value, not an error. koordlet's collector enables itself on the CPU flags checked by
:func:`monitoring_unsupported` (koordlet's ``resctrlCollector``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from koordlet.system import files
from koordlet.system.paths import HostPaths
from koordlet.system.resctrl import group_dir, is_mounted, read_cpuinfo
from koordshared.runtime.errors import InvalidValue

MON_FLAGS = ("cqm_llc", "cqm_occup_llc", "cqm_mbm_total", "cqm_mbm_local")
VENDORS = ("GenuineIntel", "AuthenticAMD")
_FILES = ("llc_occupancy", "mbm_total_bytes", "mbm_local_bytes")


def monitoring_unsupported(paths: HostPaths) -> str | None:
    """``None`` when resctrl monitoring can be read here, else why not (one log line's worth)."""
    vendor, flags = read_cpuinfo(paths)
    if vendor not in VENDORS:
        return f"CPU vendor {vendor or 'unknown'!r} has no resctrl monitoring koordlet supports"
    missing = [f for f in MON_FLAGS if f not in flags]
    if missing:
        return f"the CPU lacks {', '.join(missing)} (no cache/memory-bandwidth monitoring)"
    if not is_mounted(paths):
        return f"resctrl is not mounted at {paths.resctrl_root}"
    if not (paths.resctrl_root / "info" / "L3_MON").is_dir():
        return "the kernel's resctrl has no L3 monitoring (info/L3_MON)"
    return None


@dataclass(frozen=True, slots=True)
class MonData:
    """One cache domain of one group; ``None`` where the kernel says ``Unavailable`` or lacks the file."""

    cache_id: int
    llc_occupancy: int | None
    mbm_total_bytes: int | None
    mbm_local_bytes: int | None


def _value(text: str, path: str) -> int | None:
    text = text.strip()
    if text in ("Unavailable", "Error", ""):
        return None
    if not text.isdecimal():
        raise InvalidValue(path, text, "not a byte count")
    return int(text)


def read_mon_data(paths: HostPaths, group: str) -> dict[int, MonData]:
    """Per cache id, what ``group`` (``""``: the root/default group) holds and has moved.

    An empty dict when the group has no ``mon_data`` (gone, or monitoring off)."""
    base = group_dir(paths, group) / "mon_data"
    try:
        domains = sorted(os.listdir(base))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    out: dict[int, MonData] = {}
    for name in domains:
        prefix, _, cid = name.rpartition("_")
        if prefix != "mon_L3" or not cid.isdecimal():
            continue
        values: list[int | None] = []
        for f in _FILES:
            path = base / name / f
            text = files.read_text_unless_gone(path)
            values.append(None if text is None else _value(text, str(path)))
        out[int(cid)] = MonData(int(cid), *values)
    return out


@dataclass(frozen=True, slots=True)
class Bandwidth:
    """Memory bandwidth of one cache domain over an interval, bytes per second."""

    total: float | None
    local: float | None


def bandwidth(prev: MonData, cur: MonData, seconds: float) -> Bandwidth:
    """``Δbytes / seconds`` of the MBM counters; ``None`` where either sample lacks a value or the
    counter went back (the group was re-made)."""
    if seconds <= 0:
        raise ValueError("interval must be positive")

    def rate(a: int | None, b: int | None) -> float | None:
        if a is None or b is None or b < a:
            return None
        return (b - a) / seconds

    return Bandwidth(
        rate(prev.mbm_total_bytes, cur.mbm_total_bytes), rate(prev.mbm_local_bytes, cur.mbm_local_bytes)
    )
