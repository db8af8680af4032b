"""The cgroup resource table (v1 and v2), mode detection, safe path building and value translation.

A resource is named by its cgroup v1 file (Koordinator's convention, e.g. ``cpu.cfs_quota_us``) whatever
the host runs; :func:`to_kernel` / :func:`from_kernel` translate between that v1 meaning and the file the
kernel really has on v2 (``cpu.max``, ``cpu.weight``, ``memory.max``...). Every path is built by
:func:`resource_path`, which refuses anything that could leave the cgroup root.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import enum
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from koordlet.api.errors import ResourceUnsupported, UnsafePath
from koordlet.system import blkio
from koordlet.system.cgroupvalues import (
    CpusetValidator,
    DeviceSettingsValidator,
    DeviceValueValidator,
    IntListValidator,
    PageBytesValidator,
    RangeValidator,
    Validator,
)
from koordlet.system.paths import HostPaths
from koordshared.runtime.errors import InvalidValue

CGROUP2_SUPER_MAGIC = 0x63677270
CGROUP_SUPER_MAGIC = 0x27E0EB

CFS_BASE_PERIOD_US = 100000
CFS_QUOTA_MIN_US = 1000
# Kernel: max_cfs_runtime = MAX_BW (2^44 - 1) microseconds; larger quotas are EINVAL.
CFS_QUOTA_MAX_US = (1 << 44) - 1
SHARES_MIN, SHARES_MAX = 2, 262144
WEIGHT_MIN, WEIGHT_MAX = 1, 10000
# v1 memory.limit_in_bytes reads back PAGE_COUNTER_MAX * PAGE_SIZE rounded down when unlimited.
MEMORY_UNLIMITED_V1 = 0x7FFFFFFFFFFFF000
INT64_MAX = (1 << 63) - 1


class CgroupMode(enum.Enum):
    """cgroup v1 (including hybrid hosts whose controllers are v1) or the v2 unified hierarchy."""

    V1 = 1
    V2 = 2


@dataclass(frozen=True, slots=True)
class CgroupResource:
    """One cgroup file as Koordinator names it (``name`` is the v1 file name)."""

    name: str
    subsystem: str
    """The v1 controller directory (``cpu``, ``cpuacct``, ``cpuset``, ``memory``, ``blkio``...)."""
    v1_file: str | None
    v2_file: str | None
    """``None``: not offered on v2."""
    validator: Validator | None
    read_only: bool = False
    """Statistics files: :func:`validate` refuses any value for them."""
    v2_read_file: str | None = None
    """Where v2 reads differ from writes (``cpuset.cpus.effective``); ``None`` means ``v2_file``."""
    minus_one_is_max: bool = False
    """``-1`` (v1 semantics) means "no limit" and is written ``max`` where the kernel wants it."""


def _r(
    name: str,
    subsystem: str,
    v2_file: str | None,
    validator: Validator | None = None,
    *,
    read_only: bool = False,
    v2_read_file: str | None = None,
    minus_one_is_max: bool = False,
) -> CgroupResource:
    return CgroupResource(
        name, subsystem, name, v2_file, validator, read_only, v2_read_file, minus_one_is_max
    )


_MEM_BYTES = PageBytesValidator()
_DEVICE_VALUE = DeviceValueValidator()

_TABLE = (
    _r("cpu.cfs_quota_us", "cpu", "cpu.max", RangeValidator(CFS_QUOTA_MIN_US, CFS_QUOTA_MAX_US, True)),
    _r("cpu.cfs_period_us", "cpu", "cpu.max", RangeValidator(1000, 1000000)),
    _r("cpu.shares", "cpu", "cpu.weight", RangeValidator(SHARES_MIN, SHARES_MAX)),
    _r("cpu.cfs_burst_us", "cpu", "cpu.max.burst", RangeValidator(0, 100_000_000)),
    _r("cpu.idle", "cpu", "cpu.idle", RangeValidator(0, 1)),
    _r("cpu.bvt_warp_ns", "cpu", "cpu.bvt_warp_ns", RangeValidator(-1, 2)),
    _r("cpu.stat", "cpu", "cpu.stat", read_only=True),
    _r("tasks", "cpu", "cgroup.threads", IntListValidator()),
    _r("cgroup.procs", "cpu", "cgroup.procs", IntListValidator()),
    _r("cpuset.cpus", "cpuset", "cpuset.cpus", CpusetValidator(), v2_read_file="cpuset.cpus.effective"),
    _r("cpuset.mems", "cpuset", "cpuset.mems", CpusetValidator(), v2_read_file="cpuset.mems.effective"),
    _r("cpuacct.usage", "cpuacct", "cpu.stat", read_only=True),
    _r("cpuacct.stat", "cpuacct", "cpu.stat", read_only=True),
    # v1 PSI files exist only on kernels that patch them into cpuacct (Anolis); v2 has them everywhere.
    _r("cpu.pressure", "cpuacct", "cpu.pressure", read_only=True),
    _r("memory.pressure", "cpuacct", "memory.pressure", read_only=True),
    _r("io.pressure", "cpuacct", "io.pressure", read_only=True),
    _r("memory.usage_in_bytes", "memory", "memory.current", read_only=True),
    _r("memory.limit_in_bytes", "memory", "memory.max", _MEM_BYTES, minus_one_is_max=True),
    _r("memory.stat", "memory", "memory.stat", read_only=True),
    _r("memory.numa_stat", "memory", "memory.numa_stat", read_only=True),
    _r("memory.min", "memory", "memory.min", _MEM_BYTES, minus_one_is_max=True),
    _r("memory.low", "memory", "memory.low", _MEM_BYTES, minus_one_is_max=True),
    _r("memory.high", "memory", "memory.high", _MEM_BYTES, minus_one_is_max=True),
    _r("memory.wmark_ratio", "memory", "memory.wmark_ratio", RangeValidator(0, 100)),
    _r("memory.wmark_scale_factor", "memory", "memory.wmark_scale_factor", RangeValidator(1, 1000)),
    _r("memory.wmark_min_adj", "memory", "memory.wmark_min_adj", RangeValidator(-25, 50)),
    _r("memory.priority", "memory", "memory.priority", RangeValidator(0, 12)),
    _r("memory.use_priority_oom", "memory", "memory.use_priority_oom", RangeValidator(0, 1)),
    _r("memory.oom.group", "memory", "memory.oom.group", RangeValidator(0, 1)),
    # v1 only (no v2 equivalent): the soft limit the kernel reclaims a cgroup towards under pressure.
    _r("memory.soft_limit_in_bytes", "memory", None, _MEM_BYTES, minus_one_is_max=True),
    _r("blkio.weight", "blkio", None, RangeValidator(1, 1000)),
    _r("blkio.bfq.weight", "blkio", "io.bfq.weight", RangeValidator(1, 1000)),
    # Per-device files: the v2 file takes one line per device as well (see koordlet.system.blkio).
    _r("blkio.throttle.read_bps_device", "blkio", "io.max", _DEVICE_VALUE),
    _r("blkio.throttle.write_bps_device", "blkio", "io.max", _DEVICE_VALUE),
    _r("blkio.throttle.read_iops_device", "blkio", "io.max", _DEVICE_VALUE),
    _r("blkio.throttle.write_iops_device", "blkio", "io.max", _DEVICE_VALUE),
    _r("blkio.cost.weight", "blkio", "io.weight", DeviceValueValidator(1, 100)),
    _r("blkio.cost.qos", "blkio", "io.cost.qos", DeviceSettingsValidator()),
    _r("blkio.cost.model", "blkio", "io.cost.model", DeviceSettingsValidator()),
    _r("net_cls.classid", "net_cls", None, RangeValidator(0, (1 << 32) - 1)),
)

_V1_TAKES_MINUS_ONE = frozenset({"memory.limit_in_bytes", "memory.soft_limit_in_bytes"})

RESOURCES: Mapping[str, CgroupResource] = MappingProxyType({r.name: r for r in _TABLE})
"""Every resource the agent reads or writes, keyed by Koordinator's name (the v1 file name)."""


def get_resource(resource: str) -> CgroupResource:
    """The table entry, or :class:`ResourceUnsupported` for a name the agent does not know."""
    res = RESOURCES.get(resource)
    if res is None:
        raise ResourceUnsupported(f"unknown cgroup resource {resource!r}")
    return res


# ---------------------------------------------------------------------------------------------------
# Mode detection
# ---------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


def _statfs_type(path: Path | str) -> int | None:
    """``f_type`` of ``statfs(path)``; ``None`` when libc cannot be called (then the caller falls back)."""
    libc = _libc()
    if libc is None:
        return None
    # struct statfs starts with f_type (__fsword_t, a C long) on every Linux ABI; 256 bytes covers it all.
    buf = ctypes.create_string_buffer(256)
    if libc.statfs(os.fsencode(path), buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF


def detect_mode(paths: HostPaths) -> CgroupMode:
    """V2 iff the cgroup root is a cgroup2 mount (statfs magic) or has ``cgroup.controllers`` at its top.

    A hybrid host (v1 controllers, cgroup2 at ``unified/``) has a tmpfs root without
    ``cgroup.controllers``, so it is V1; the presence of some cgroup2 mount elsewhere proves nothing.
    """
    if _statfs_type(paths.cgroup_root) == CGROUP2_SUPER_MAGIC:
        return CgroupMode.V2
    if (paths.cgroup_root / "cgroup.controllers").is_file():
        return CgroupMode.V2
    return CgroupMode.V1


# ---------------------------------------------------------------------------------------------------
# Paths
# ---------------------------------------------------------------------------------------------------


def check_cgroup_dir(cgroup_dir: str) -> str:
    """``cgroup_dir`` without trailing slashes, or :class:`UnsafePath` if it is absolute or has ``..``."""
    if "\x00" in cgroup_dir:
        raise UnsafePath(f"NUL byte in cgroup dir {cgroup_dir!r}")
    if cgroup_dir.startswith("/"):
        raise UnsafePath(f"absolute cgroup dir {cgroup_dir!r}: must be relative to a subsystem root")
    if len(cgroup_dir) > 4096:
        raise UnsafePath(f"cgroup dir longer than PATH_MAX: {cgroup_dir[:64]!r}...")
    trimmed = cgroup_dir.rstrip("/")
    if trimmed and any(part in ("", ".", "..") for part in trimmed.split("/")):
        raise UnsafePath(f"cgroup dir {cgroup_dir!r} has an empty, '.' or '..' component")
    return trimmed


def subsystem_root(paths: HostPaths, mode: CgroupMode, subsystem: str) -> Path:
    """``<cgroup_root>/<subsystem>`` on V1, the cgroup root itself on V2."""
    return paths.cgroup_root / subsystem if mode is CgroupMode.V1 else paths.cgroup_root


def cgroup_dir_path(paths: HostPaths, mode: CgroupMode, subsystem: str, cgroup_dir: str) -> Path:
    """The directory of ``cgroup_dir`` in ``subsystem``, checked to stay under the subsystem root."""
    base = subsystem_root(paths, mode, subsystem)
    trimmed = check_cgroup_dir(cgroup_dir)
    full = base / trimmed if trimmed else base
    _check_under(base, full)
    return full


@functools.lru_cache(maxsize=64)
def _is_cgroup_mount(base: Path) -> bool:
    """Whether ``base`` is (in) a real cgroup v1/v2 filesystem; mounts do not come and go under us."""
    return _statfs_type(base) in (CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC)


def _check_under(base: Path, full: Path) -> None:
    if _is_cgroup_mount(base):
        # kernfs refuses symlink(2) (EPERM, checked on this kernel), so inside a real cgroup mount the
        # lexical checks of check_cgroup_dir are exact and the per-component lstat walk can be skipped.
        return
    # Elsewhere (a tmp tree, a bind-mounted copy) resolve symlinks of both: the subsystem dir itself may
    # legitimately be a link (cpu -> cpu,cpuacct), but nothing below it may point outside.
    real_base = os.path.realpath(base)
    real_full = os.path.realpath(full)
    if os.path.commonpath([real_base, real_full]) != real_base:
        raise UnsafePath(f"{full} resolves to {real_full}, outside {real_base}")


def _file_for(res: CgroupResource, mode: CgroupMode, *, for_read: bool) -> str:
    if mode is CgroupMode.V1:
        if res.v1_file is None:
            raise ResourceUnsupported(f"{res.name} is not offered on cgroup v1")
        return res.v1_file
    if res.v2_file is None:
        raise ResourceUnsupported(f"{res.name} is not offered on cgroup v2")
    return (res.v2_read_file or res.v2_file) if for_read else res.v2_file


def resource_path(
    paths: HostPaths, mode: CgroupMode, resource: str, cgroup_dir: str, *, for_read: bool = False
) -> Path:
    """The file holding ``resource`` for ``cgroup_dir`` (a dir relative to the subsystem root).

    V1: ``<cgroup_root>/<subsystem>/<cgroup_dir>/<v1_file>``; V2: ``<cgroup_root>/<cgroup_dir>/<v2_file>``
    (``for_read`` picks the ``*.effective`` file where v2 reads differ from writes). Raises
    :class:`ResourceUnsupported` and :class:`UnsafePath`.
    """
    base, full = _lexical_path(paths.cgroup_root, mode, resource, cgroup_dir, for_read)
    _check_under(base, full)
    return full


@functools.lru_cache(maxsize=16384)
def _lexical_path(
    cgroup_root: Path, mode: CgroupMode, resource: str, cgroup_dir: str, for_read: bool
) -> tuple[Path, Path]:
    # Pure string work, so it is memoized (collectors build the same few thousand paths every tick);
    # refusals raise and are therefore never cached.
    res = get_resource(resource)
    file_name = _file_for(res, mode, for_read=for_read)
    base = cgroup_root / res.subsystem if mode is CgroupMode.V1 else cgroup_root
    trimmed = check_cgroup_dir(cgroup_dir)
    return base, (base / trimmed / file_name) if trimmed else base / file_name


# ---------------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------------


def validate(resource: str, value: str, *, online_cpus: frozenset[int] | None = None) -> str:
    """The normalized value (v1 semantics) or :class:`InvalidValue`; nothing is written here."""
    res = get_resource(resource)
    if res.read_only:
        raise InvalidValue(resource, value, "read-only statistics file")
    if "\x00" in value or "\n" in value.strip():
        raise InvalidValue(resource, value, "control characters in value")
    text = value.strip()
    if res.minus_one_is_max and text == "max":
        text = "-1"
    if res.validator is None:
        return text
    return res.validator.check(resource, text, online_cpus)


def shares_to_weight(shares: int) -> int:
    """cpu.shares (2..262144) -> cpu.weight (1..10000), the kernel documentation's linear map."""
    return WEIGHT_MIN + (shares - SHARES_MIN) * (WEIGHT_MAX - WEIGHT_MIN) // (SHARES_MAX - SHARES_MIN)


def weight_to_shares(weight: int) -> int:
    """cpu.weight -> cpu.shares, rounded up so that ``shares_to_weight(weight_to_shares(w)) == w``: a
    value read back from v2 and written again does not drift."""
    return -(-(weight - WEIGHT_MIN) * (SHARES_MAX - SHARES_MIN) // (WEIGHT_MAX - WEIGHT_MIN)) + SHARES_MIN


def _cpu_max_fields(current: str | None) -> tuple[str, str]:
    fields = (current or "").split()
    quota = fields[0] if fields else "max"
    period = fields[1] if len(fields) > 1 else str(CFS_BASE_PERIOD_US)
    return quota, period


def to_kernel(resource: str, mode: CgroupMode, value: str, current: str | None = None) -> tuple[str, str]:
    """``(file name, text to write)`` for ``mode``; ``value`` has v1 semantics and is validated first.

    ``current`` is what the target file holds now; it matters where one v2 file carries two v1 values
    (``cpu.max`` = quota and period), so writing one keeps the other.
    """
    res = get_resource(resource)
    norm = validate(resource, value)
    file_name = _file_for(res, mode, for_read=False)
    if mode is CgroupMode.V1:
        if res.minus_one_is_max and norm == "-1" and resource not in _V1_TAKES_MINUS_ONE:
            # Anolis' v1 memory.min/low/high parse like v2 ("max"); the v1 limits take -1 themselves.
            return file_name, "max"
        return file_name, norm
    if resource in blkio.DEVICE_RESOURCES:
        return blkio.to_v2(resource, norm)
    if resource == "cpu.cfs_quota_us":
        _, period = _cpu_max_fields(current)
        return file_name, f"{'max' if norm == '-1' else norm} {period}"
    if resource == "cpu.cfs_period_us":
        quota, _ = _cpu_max_fields(current)
        return file_name, f"{quota} {norm}"
    if resource == "cpu.shares":
        return file_name, str(shares_to_weight(int(norm)))
    if res.minus_one_is_max and norm == "-1":
        return file_name, "max"
    return file_name, norm


def _stat_value(raw: str, key: str) -> int | None:
    for line in raw.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == key:
            try:
                return int(fields[1])
            except ValueError:
                return None
    return None


def from_kernel(resource: str, mode: CgroupMode, raw: str) -> str:
    """The v1-style value of ``resource`` from the raw text of its kernel file on ``mode``.

    Statistics files (``cpu.stat``, ``memory.stat``...) come back as the kernel wrote them: their v1 and v2
    keys differ, and :mod:`koordlet.system.cgstats` parses both into typed values. Raises
    :class:`InvalidValue` when the file does not hold what the kernel would write there.
    """
    res = get_resource(resource)
    text = raw.strip()
    if mode is CgroupMode.V1:
        unlimited = text == "max" or (text.isdecimal() and int(text) >= MEMORY_UNLIMITED_V1)
        if res.minus_one_is_max and unlimited:
            return "-1"
        return text
    if resource in blkio.DEVICE_RESOURCES:
        return blkio.from_v2(resource, text)
    if resource == "blkio.bfq.weight":
        # v2 io.bfq.weight reads "default <w>" (plus per-device lines); v1 shows the bare weight
        default, _ = blkio.parse_io_weight(text)
        return str(default) if default is not None else text
    if resource in ("cpu.cfs_quota_us", "cpu.cfs_period_us"):
        fields = text.split()
        if len(fields) != 2:
            raise InvalidValue(resource, raw, "cpu.max must hold '<quota|max> <period>'")
        if resource == "cpu.cfs_period_us":
            return fields[1]
        return "-1" if fields[0] == "max" else fields[0]
    if resource == "cpu.shares":
        try:
            return str(weight_to_shares(int(text)))
        except ValueError as err:
            raise InvalidValue(resource, raw, "cpu.weight is not an integer") from err
    if resource == "cpuacct.usage":
        usec = _stat_value(text, "usage_usec")
        if usec is None:
            raise InvalidValue(resource, raw, "cpu.stat has no usage_usec")
        return str(usec * 1000)
    if res.minus_one_is_max and text == "max":
        return "-1"
    return text
