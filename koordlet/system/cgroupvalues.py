"""Validators for cgroup values: each one refuses what the kernel would refuse (or silently misread).

A validator sees a stripped string with v1 semantics and returns its normalized form or raises
:class:`InvalidValue`. They run before any write, so a bug upstream cannot reach the kernel: e.g. the
kernel accepts ``cpu.cfs_quota_us = -2`` and reads it back as -1 (unlimited), which would un-throttle BE.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Protocol

from koordlet.api.cpulist import format_cpuset, parse_cpuset
from koordlet.system.blkio import check_kv_value
from koordshared.runtime.errors import InvalidValue

_INT = re.compile(r"^-?\d{1,20}\Z")
_DEVICE_VALUE = re.compile(r"^(\d{1,10}):(\d{1,10}) (\d{1,20})\Z")


class Validator(Protocol):
    """Checks one value for one resource; ``online_cpus`` matters only to cpu lists."""

    def check(self, resource: str, value: str, online_cpus: frozenset[int] | None) -> str: ...


def parse_int(resource: str, value: str) -> int:
    """A decimal integer as the kernel's ``kstrtoll`` takes it (no '+', no hex, no spaces inside)."""
    if not _INT.match(value):
        raise InvalidValue(resource, value, "not a decimal integer")
    return int(value)


@dataclass(frozen=True, slots=True)
class RangeValidator:
    """``lo <= v <= hi``; with ``allow_minus_one``, -1 ("unlimited") passes too but no other negative."""

    lo: int
    hi: int
    allow_minus_one: bool = False

    def check(self, resource: str, value: str, online_cpus: frozenset[int] | None) -> str:
        n = parse_int(resource, value)
        if self.allow_minus_one and n == -1:
            return "-1"
        if not self.lo <= n <= self.hi:
            extra = " or -1" if self.allow_minus_one else ""
            raise InvalidValue(resource, value, f"outside [{self.lo}, {self.hi}]{extra}")
        return str(n)


@dataclass(frozen=True, slots=True)
class CpusetValidator:
    """A non-empty cpu list in kernel syntax; with ``online_cpus``, every id must be online."""

    def check(self, resource: str, value: str, online_cpus: frozenset[int] | None) -> str:
        cpus = parse_cpuset(value, resource=resource)
        if not cpus:
            # An empty cpuset makes its tasks unschedulable (and the kernel refuses it with tasks inside).
            raise InvalidValue(resource, value, "empty list")
        if online_cpus is not None and resource == "cpuset.cpus":
            offline = cpus - online_cpus
            if offline:
                raise InvalidValue(resource, value, f"cpus {format_cpuset(offline)} are not online")
        return format_cpuset(cpus)


@dataclass(frozen=True, slots=True)
class IntListValidator:
    """One positive id (a TID or PID to move into ``tasks``/``cgroup.procs``)."""

    def check(self, resource: str, value: str, online_cpus: frozenset[int] | None) -> str:
        n = parse_int(resource, value)
        if n <= 0:
            raise InvalidValue(resource, value, "ids are positive")
        return str(n)


@dataclass(frozen=True, slots=True)
class DeviceValueValidator:
    """``<major>:<minor> <value>`` as the blkio per-device files take it; ``0`` removes the device's line,
    any other value must lie in ``[lo, hi]``."""

    lo: int = 1
    hi: int = (1 << 63) - 1

    def check(self, resource: str, value: str, online_cpus: frozenset[int] | None) -> str:
        m = _DEVICE_VALUE.match(" ".join(value.split()))
        if m is None:
            raise InvalidValue(resource, value, "expected '<major>:<minor> <value>'")
        n = int(m.group(3))
        if n != 0 and not self.lo <= n <= self.hi:
            raise InvalidValue(resource, value, f"outside [{self.lo}, {self.hi}] (0 removes)")
        return f"{int(m.group(1))}:{int(m.group(2))} {n}"


@dataclass(frozen=True, slots=True)
class DeviceSettingsValidator:
    """``<major>:<minor> key=value ...`` (iocost ``qos``/``model`` lines)."""

    def check(self, resource: str, value: str, online_cpus: frozenset[int] | None) -> str:
        return check_kv_value(resource, value)


def page_size() -> int:
    return int(os.sysconf("SC_PAGE_SIZE"))


@dataclass(frozen=True, slots=True)
class PageBytesValidator:
    """Memory bytes the kernel keeps in pages (``page_counter_memparse``): the value is rounded down to
    a page, so what is written equals what reads back and an unchanged value is seen as unchanged.
    ``-1`` ("no limit"/``max``) passes where ``allow_minus_one``."""

    lo: int = 0
    hi: int = (1 << 63) - 1
    allow_minus_one: bool = True
    page: int = 0
    """0: the host's page size."""

    def check(self, resource: str, value: str, online_cpus: frozenset[int] | None) -> str:
        norm = RangeValidator(self.lo, self.hi, self.allow_minus_one).check(resource, value, online_cpus)
        if norm == "-1":
            return norm
        page = self.page or page_size()
        return str(int(norm) // page * page)
