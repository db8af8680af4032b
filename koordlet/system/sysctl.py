"""Kernel tunables outside cgroups (koordlet's ``SystemResource``): ``/proc/sys`` and ``/sys`` files.

Each :class:`SysctlResource` names one file under a :class:`HostPaths` root with a validator that refuses
what the kernel (or Koordinator) would not take; ``optional`` ones exist on some kernels only (Anolis'
memcg reaper, group identity, page cache limit) and are "unsupported" elsewhere, never an error.
``sched_features`` is a flag list: a value is one feature, ``NAME`` (on) or ``NO_NAME`` (off), and the
file reads back every feature in that form. Writes go through the resource executor
(``koordlet.resourceexecutor.sysctlwrites``), which also keeps the value found before its first write
so a plugin can restore it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from koordlet.api.errors import ResourceUnsupported
from koordlet.system import files
from koordlet.system.cgroupvalues import RangeValidator, Validator
from koordlet.system.paths import HostPaths
from koordshared.runtime.errors import InvalidValue

_FEATURE = re.compile(r"^(?:NO_)?[A-Z][A-Z0-9_]{0,63}\Z")


@dataclass(frozen=True, slots=True)
class SchedFeatureValidator:
    """One scheduler feature, ``NAME`` or ``NO_NAME`` (upper case, as the kernel lists them)."""

    def check(self, resource: str, value: str, online_cpus: frozenset[int] | None) -> str:
        if not _FEATURE.match(value):
            raise InvalidValue(resource, value, "expected one feature, NAME or NO_NAME")
        return value


@dataclass(frozen=True, slots=True)
class SysctlResource:
    """One tunable file: ``<root>/<relpath>``."""

    name: str
    root: Literal["proc", "sys"]
    relpath: str
    validator: Validator
    optional: bool = False
    """Present only on some kernels: a missing file means unsupported."""
    flag_list: bool = False
    """The file lists flags (``sched_features``); a value sets one of them."""

    def path(self, paths: HostPaths) -> Path:
        return (paths.proc_root if self.root == "proc" else paths.sys_root) / self.relpath


_TABLE = (
    # Koordinator's ranges: min_free_kbytes 10 MiB..10 GiB, watermark_scale_factor 10..400 (0.1 %..4 %).
    SysctlResource("min_free_kbytes", "proc", "sys/vm/min_free_kbytes", RangeValidator(10240, 10485760)),
    SysctlResource(
        "watermark_scale_factor", "proc", "sys/vm/watermark_scale_factor", RangeValidator(10, 400)
    ),
    SysctlResource(
        "memcg_reap_background", "sys", "kernel/mm/memcg_reaper/reap_background", RangeValidator(0, 1), True
    ),
    SysctlResource(
        "sched_group_identity_enabled",
        "proc",
        "sys/kernel/sched_group_identity_enabled",
        RangeValidator(0, 1),
        True,
    ),
    SysctlResource(
        "sched_idle_saver_wmark",
        "proc",
        "sys/kernel/sched_idle_saver_wmark",
        RangeValidator(0, 1 << 31),
        True,
    ),
    SysctlResource(
        "pagecache_limit_enabled", "sys", "kernel/mm/pagecache_limit/enabled", RangeValidator(0, 1), True
    ),
    SysctlResource(
        "sched_features", "sys", "kernel/debug/sched_features", SchedFeatureValidator(), True, flag_list=True
    ),
)

SYSCTLS: Mapping[str, SysctlResource] = MappingProxyType({r.name: r for r in _TABLE})
"""Koordinator's ``systemStrategy`` files (§6.8), by name. The names are the file names except
``memcg_reap_background`` and ``pagecache_limit_enabled`` (both files are plainly ``reap_background``
and ``enabled``)."""


def get_sysctl(name: str) -> SysctlResource:
    res = SYSCTLS.get(name)
    if res is None:
        raise ResourceUnsupported(f"unknown system resource {name!r}")
    return res


def validate(name: str, value: str) -> str:
    """The normalized value or :class:`InvalidValue`; nothing is read or written."""
    text = value.strip()
    if "\x00" in text or "\n" in text:
        raise InvalidValue(name, value, "control characters in value")
    return get_sysctl(name).validator.check(name, text, None)


def flag_name(value: str) -> str:
    """The feature a ``sched_features`` value is about (``NO_X`` and ``X`` are both about ``X``)."""
    return value.removeprefix("NO_")


def flag_state(current: str, value: str) -> str | None:
    """How ``current`` (the listing) shows the feature of ``value``: ``X``, ``NO_X`` or ``None``."""
    name = flag_name(value)
    for token in current.split():
        if flag_name(token) == name:
            return token
    return None


def same(name: str, current: str | None, value: str) -> bool:
    """Whether ``current`` (the file's text) already holds ``value``."""
    if current is None:
        return False
    if get_sysctl(name).flag_list:
        return flag_state(current, value) == value
    return current.strip() == value.strip()


def read(paths: HostPaths, name: str) -> str | None:
    """The file's value (for a flag list, the whole listing); ``None`` where the kernel lacks it."""
    res = get_sysctl(name)
    try:
        return files.read_text(res.path(paths)).strip()
    except FileNotFoundError:
        if res.optional:
            return None
        raise
