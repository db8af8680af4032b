"""Value semantics the executor needs: equality as the kernel means it, merge conditions, last-line guards.

Layer: ``koordlet.resourceexecutor``; pure functions over v1-style strings (what ``cgroups.validate`` and
``cgroups.from_kernel`` return), no I/O.
"""

from __future__ import annotations

from koordlet.api import cpulist
from koordlet.system import blkio, cgroups
from koordlet.system.cgroups import CgroupMode
from koordshared.runtime.errors import InvalidValue

UNLIMITED_TOKENS = frozenset({"max", "-1", str(2**63 - 1)})
"""Spellings of "no limit": v2 writes ``max``, v1 quota ``-1``, and some files read back INT64_MAX."""

CPUSET_RESOURCES = frozenset({"cpuset.cpus", "cpuset.mems"})
LARGER_IS_LOOSER = frozenset({"cpu.cfs_quota_us", "memory.min", "memory.low", "memory.high"})
MERGEABLE = LARGER_IS_LOOSER | {"cpuset.cpus"}
"""Resources whose hierarchy constrains children (v1 cpuset, cfs bandwidth) or whose protection is
capped by the parent (memory.min/low); leveled updates write a loosened merge first."""
APPEND_ONLY = frozenset({"tasks", "cgroup.procs"})
"""Writing an id moves it in; the file never reads back as the value written."""


def cache_key(resource: str, path: str, value: str) -> str:
    """The executor's cache key: the file, plus the resource where one v2 file carries several
    (``cpu.max``, ``io.max``) and the device where one file has a line per device."""
    key = path if path.rsplit("/", 1)[-1] == resource else f"{path}#{resource}"
    if resource in blkio.DEVICE_RESOURCES:
        key += "#" + value.split(" ", 1)[0]
    return key


def _unlimited(token: str) -> bool:
    return token in UNLIMITED_TOKENS


def same(resource: str, a: str | None, b: str | None) -> bool:
    """Whether two v1-style values mean the same to the kernel (cpu lists as sets, every "no limit")."""
    if a is None or b is None:
        return a is b
    a, b = a.strip(), b.strip()
    if resource in blkio.DEVICE_RESOURCES:
        # a file holds one line per device; compare only the device the wanted value names
        try:
            return blkio.same_device_value(resource, a, b)
        except (InvalidValue, ValueError):
            return a == b
    if resource in CPUSET_RESOURCES:
        try:
            return cpulist.parse_cpuset(a, resource=resource) == cpulist.parse_cpuset(b, resource=resource)
        except InvalidValue:
            return a == b
    if _unlimited(a) or _unlimited(b):
        return _unlimited(a) and _unlimited(b)
    return a == b


def holds(resource: str, mode: CgroupMode, value: str, current: str | None, raw: str | None) -> bool:
    """Whether the file already says ``value``: the same v1 meaning as ``current`` (:func:`same`), or its
    text ``raw`` is exactly what the write would put there. The second is how an unchanged v2
    ``cpu.weight`` is told: it reads back as shares that need not equal the shares asked for, and
    rewriting the same weight on every pass would never end."""
    if same(resource, current, value):
        return True
    if raw is None or mode is CgroupMode.V1:
        return False
    try:
        return cgroups.to_kernel(resource, mode, value, raw)[1].strip() == raw.strip()
    except InvalidValue:
        return False


def _as_bound(value: str) -> int | None:
    """An integer limit, ``None`` for unlimited; ValueError for anything else."""
    if _unlimited(value):
        return None
    return int(value)


def merge(resource: str, current: str, new: str) -> str | None:
    """The loosest of ``current`` and ``new`` (cpu union, larger limit), or ``None`` if not mergeable.

    A leveled update writes this top-down first, so no child is ever wider than its parent.
    """
    if resource not in MERGEABLE:
        return None
    if resource == "cpuset.cpus":
        try:
            union = cpulist.parse_cpuset(current) | cpulist.parse_cpuset(new)
        except InvalidValue:
            return new
        return cpulist.format_cpuset(union)
    try:
        cur, nxt = _as_bound(current), _as_bound(new)
    except ValueError:
        return new
    if cur is None or nxt is None:
        return "-1"
    return str(max(cur, nxt))


def guard_kernel_text(resource: str, file_name: str, text: str) -> str | None:
    """Last check on the exact text about to be written; a reason string if it must not be.

    The kernel takes ``cpu.cfs_quota_us = -2`` and reads it back as -1 (unlimited), so a bug
    upstream would silently un-throttle BE; only ``-1``/``max`` may express "no limit".
    """
    if resource != "cpu.cfs_quota_us":
        return None
    fields = text.split()
    quota = fields[0] if fields else ""
    if quota in ("max", "-1"):
        return None
    if not quota.isdecimal():
        return f"quota {quota!r} is neither a non-negative integer nor -1/max (file {file_name})"
    return None
