"""Parsers for procfs: ``/proc/stat``, ``/proc/meminfo`` and PSI files (``/proc/pressure``, cgroups).

Each ``parse_*`` takes file text and returns a frozen value; ``read_meminfo`` takes :class:`HostPaths`.
Malformed text raises :class:`InvalidValue` so a collector can count the error and skip the series.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from koordlet.system.paths import HostPaths
from koordshared.runtime.errors import InvalidValue


def clock_ticks() -> int:
    """USER_HZ, the unit of /proc/stat times (100 on every mainstream build)."""
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError):
        return 100


# ---------------------------------------------------------------------------------------------------
# /proc/stat
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CPUTicks:
    """One ``cpu``/``cpuN`` line of /proc/stat in USER_HZ ticks."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int = 0

    @property
    def busy(self) -> int:
        """koordlet's node usage: user+nice+system+irq+softirq (idle, iowait and steal excluded)."""
        return self.user + self.nice + self.system + self.irq + self.softirq


@dataclass(frozen=True, slots=True)
class ProcStat:
    total: CPUTicks
    per_cpu: Mapping[int, CPUTicks]


def _unsigned(field: str) -> bool:
    return field.isascii() and field.isdecimal()


def _ticks(name: str, fields: list[str], text: str) -> CPUTicks:
    # Fields after the name: user nice system idle iowait irq softirq steal guest guest_nice;
    # guest time is already included in user, so it is not added again.
    # int() would also take "-1", "+5" and "1_0"; the kernel prints unsigned decimals only
    if not all(_unsigned(f) for f in fields[:8]):
        raise InvalidValue("/proc/stat", text[:200], f"a field on {name!r} is not an unsigned integer")
    values = [int(f) for f in fields[:8]]
    if len(values) < 7:
        raise InvalidValue("/proc/stat", text[:200], f"short {name!r} line")
    return CPUTicks(*values)


def parse_proc_stat(text: str) -> ProcStat:
    total: CPUTicks | None = None
    per_cpu: dict[int, CPUTicks] = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        name, *fields = line.split()
        if name == "cpu":
            total = _ticks(name, fields, text)
        elif name[3:].isdecimal():
            per_cpu[int(name[3:])] = _ticks(name, fields, text)
    if total is None:
        raise InvalidValue("/proc/stat", text[:200], "no aggregate 'cpu' line")
    return ProcStat(total, MappingProxyType(per_cpu))


# ---------------------------------------------------------------------------------------------------
# /proc/meminfo
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemInfo:
    """/proc/meminfo in bytes, keyed as the kernel names the fields (``MemTotal``, ``Active(file)``...)."""

    fields: Mapping[str, int]

    def get(self, key: str) -> int:
        return self.fields.get(key, 0)

    @property
    def total(self) -> int:
        return self.get("MemTotal")

    @property
    def available(self) -> int:
        return self.get("MemAvailable")

    @property
    def used(self) -> int:
        """koordlet's node memory usage: MemTotal - MemAvailable."""
        return max(self.total - self.available, 0)

    @property
    def used_with_page_cache(self) -> int:
        """koordlet's node memory usage with page cache: ``MemTotal - MemFree``."""
        return max(self.total - self.get("MemFree"), 0)


def parse_meminfo(text: str) -> MemInfo:
    fields: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        parts = rest.split()
        if not sep or not parts:
            continue
        if not _unsigned(parts[0]):
            raise InvalidValue("/proc/meminfo", line, "not an unsigned integer")
        value = int(parts[0])
        fields[key.strip()] = value * 1024 if len(parts) > 1 and parts[1] == "kB" else value
    if "MemTotal" not in fields or "MemAvailable" not in fields:
        raise InvalidValue("/proc/meminfo", text[:200], "MemTotal or MemAvailable missing")
    return MemInfo(MappingProxyType(fields))


def read_meminfo(paths: HostPaths) -> MemInfo:
    return parse_meminfo(paths.proc("meminfo").read_text())


# ---------------------------------------------------------------------------------------------------
# PSI (/proc/pressure/* and cgroup *.pressure)
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PSILine:
    """Percent of wall time stalled over 10/60/300 s windows, and the total stall in microseconds."""

    avg10: float
    avg60: float
    avg300: float
    total_us: int


@dataclass(frozen=True, slots=True)
class PSI:
    some: PSILine
    full: PSILine | None
    """``None`` where the kernel has no ``full`` line (system-wide CPU before 5.13)."""


def _psi_line(line: str, text: str) -> tuple[str, PSILine]:
    kind, *pairs = line.split()
    values: dict[str, str] = {}
    for pair in pairs:
        k, sep, v = pair.partition("=")
        if sep:
            values[k] = v
    try:
        return kind, PSILine(
            float(values["avg10"]), float(values["avg60"]), float(values["avg300"]), int(values["total"])
        )
    except (KeyError, ValueError) as err:
        raise InvalidValue("pressure", text[:200], f"bad {kind!r} line") from err


def parse_psi(text: str) -> PSI:
    lines = dict(_psi_line(line, text) for line in text.splitlines() if line.strip())
    if "some" not in lines:
        raise InvalidValue("pressure", text[:200], "no 'some' line")
    return PSI(lines["some"], lines.get("full"))
