"""The resctrl filesystem (Intel RDT / AMD PQoS): detection, info, groups, schemata and task sets.

Reads, parsing and formatting only: schemata and tasks WRITES go through the resource executor, which
takes the paths and texts built here. ``L3`` masks are hex capacity bitmasks per cache id; ``MB`` values
are bandwidth percent (Intel) or absolute units (AMD) per id.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from koordlet.api.errors import UnsafePath
from koordlet.system import files
from koordlet.system.paths import HostPaths
from koordshared.runtime.errors import InvalidValue

GROUP_LSR, GROUP_LS, GROUP_BE = "LSR", "LS", "BE"
GROUPS = (GROUP_LSR, GROUP_LS, GROUP_BE)
POD_GROUP_PREFIX = "koordlet-"
_GROUP_NAME = re.compile(r"^(?:LSR|LS|BE|koordlet-[a-z0-9][a-z0-9-]{0,62})\Z")
_DOMAIN = re.compile(r"^\s*(\d+)\s*=\s*([0-9a-fA-F]+)\s*\Z")

AMD_MBA_UNLIMITED = 2048
"""AMD's MB value meaning "no limit" (units of 1/8 GB/s; 2048 is above any link)."""


# ---------------------------------------------------------------------------------------------------
# Detection and info
# ---------------------------------------------------------------------------------------------------


def is_mounted(paths: HostPaths) -> bool:
    return (paths.resctrl_root / "info").is_dir()


def read_cpuinfo(paths: HostPaths) -> tuple[str, frozenset[str]]:
    """``(vendor_id, flags)`` of the first processor in ``<proc>/cpuinfo``."""
    vendor, flags = "", frozenset[str]()
    try:
        text = paths.proc("cpuinfo").read_text()
    except FileNotFoundError:
        return vendor, flags
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "vendor_id" and not vendor:
            vendor = value.strip()
        elif key == "flags" and not flags:
            flags = frozenset(value.split())
        if vendor and flags:
            break
    return vendor, flags


CONTROL_FLAGS = ("cat_l3", "mba")
"""CPU flags koordlet's ``IsSupportResctrl`` asks for: L3 cache allocation and memory bandwidth allocation."""
VENDOR_AMD = "AuthenticAMD"


def control_unsupported(paths: HostPaths) -> str | None:
    """``None`` when resctrl control groups can be used here (mounted, or mountable at the resctrl root);
    else why not, in one log line's worth."""
    _, flags = read_cpuinfo(paths)
    missing = [f for f in CONTROL_FLAGS if f not in flags]
    if missing:
        return f"the CPU lacks {', '.join(missing)} (no L3 cache or memory bandwidth allocation)"
    if not is_mounted(paths) and not paths.resctrl_root.is_dir():
        return f"the kernel has no resctrl filesystem (no {paths.resctrl_root} to mount it on)"
    return None


def mount(paths: HostPaths) -> None:
    """Mount resctrl at its root (koordlet's ``CheckAndTryEnableResctrlCat``); ``OSError`` on failure."""
    root = str(paths.resctrl_root)
    try:
        done = subprocess.run(
            ["mount", "-t", "resctrl", "resctrl", root],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as err:
        raise OSError(errno.EIO, f"mount -t resctrl resctrl {root}: {err}") from err
    if done.returncode != 0:
        raise OSError(errno.EIO, f"mount -t resctrl resctrl {root}: {done.stderr.strip() or done.returncode}")


@dataclass(frozen=True, slots=True)
class ResctrlInfo:
    cbm_mask: int
    """Full L3 capacity bitmask (all ways), e.g. 0x7ff."""
    min_cbm_bits: int = 1
    num_closids: int = 0
    bandwidth_gran: int | None = None
    """MBA granularity in percent (Intel), ``None`` without MB."""
    min_bandwidth: int | None = None

    @property
    def ways(self) -> int:
        return self.cbm_mask.bit_length()


def _read_int_file(path: Path, base: int = 10) -> int | None:
    try:
        return int(path.read_text().strip(), base)
    except (FileNotFoundError, ValueError):
        return None


def read_info(paths: HostPaths) -> ResctrlInfo:
    """``info/L3`` and ``info/MB``; raises :class:`InvalidValue` if there is no usable ``cbm_mask``."""
    l3 = paths.resctrl_root / "info" / "L3"
    mb = paths.resctrl_root / "info" / "MB"
    cbm = _read_int_file(l3 / "cbm_mask", 16)
    if cbm is None or cbm <= 0:
        raise InvalidValue("info/L3/cbm_mask", cbm, "missing or not a hex mask")
    return ResctrlInfo(
        cbm_mask=cbm,
        min_cbm_bits=_read_int_file(l3 / "min_cbm_bits") or 1,
        num_closids=_read_int_file(l3 / "num_closids") or 0,
        bandwidth_gran=_read_int_file(mb / "bandwidth_gran"),
        min_bandwidth=_read_int_file(mb / "min_bandwidth"),
    )


# ---------------------------------------------------------------------------------------------------
# Groups
# ---------------------------------------------------------------------------------------------------


def group_dir(paths: HostPaths, group: str) -> Path:
    """``<resctrl>/<group>``; ``""`` is the root (default) group. Other names are refused."""
    if group == "":
        return paths.resctrl_root
    if not _GROUP_NAME.match(group):
        raise UnsafePath(f"bad resctrl group name {group!r}")
    return paths.resctrl_root / group


def schemata_path(paths: HostPaths, group: str) -> Path:
    return group_dir(paths, group) / "schemata"


def tasks_path(paths: HostPaths, group: str) -> Path:
    return group_dir(paths, group) / "tasks"


def make_group(paths: HostPaths, group: str) -> bool:
    """Create the control group (a resctrl group is made by ``mkdir``); False if it existed."""
    try:
        os.mkdir(group_dir(paths, group), 0o755)
    except FileExistsError:
        return False
    return True


def remove_group(paths: HostPaths, group: str) -> bool:
    """Remove the control group (the kernel moves its tasks to the default group); False if absent."""
    if group == "":
        raise UnsafePath("the default resctrl group cannot be removed")
    try:
        os.rmdir(group_dir(paths, group))
    except FileNotFoundError:
        return False
    return True


# ---------------------------------------------------------------------------------------------------
# Schemata
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Schemata:
    l3: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    """cache id -> capacity bitmask."""
    mb: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    """cache id -> bandwidth (percent on Intel)."""
    other: tuple[str, ...] = ()
    """Lines this agent does not manage (L2, MPAM...), kept verbatim."""


def _domains(prefix: str, body: str, base: int, text: str) -> dict[int, int]:
    out: dict[int, int] = {}
    for item in body.split(";"):
        if not item.strip():
            continue
        m = _DOMAIN.match(item)
        if m is None:
            raise InvalidValue("schemata", text[:200], f"bad {prefix} domain {item!r}")
        try:
            out[int(m.group(1))] = int(m.group(2), base)
        except ValueError as err:
            raise InvalidValue("schemata", text[:200], f"bad {prefix} value {item!r}") from err
    return out


def parse_schemata(text: str) -> Schemata:
    l3: dict[int, int] = {}
    mb: dict[int, int] = {}
    other: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        prefix, sep, body = line.partition(":")
        name = prefix.strip()
        if sep and name == "L3":
            l3 = _domains(name, body, 16, text)
        elif sep and name == "MB":
            mb = _domains(name, body, 10, text)
        else:
            other.append(line)
    return Schemata(MappingProxyType(l3), MappingProxyType(mb), tuple(other))


def format_l3_line(masks: Mapping[int, int]) -> str:
    return "L3:" + ";".join(f"{cid}={mask:x}" for cid, mask in sorted(masks.items())) + "\n"


def format_mb_line(values: Mapping[int, int]) -> str:
    return "MB:" + ";".join(f"{cid}={v}" for cid, v in sorted(values.items())) + "\n"


def format_schemata(s: Schemata) -> str:
    """Managed lines only (the kernel updates just the resources named in a write)."""
    return (format_l3_line(s.l3) if s.l3 else "") + (format_mb_line(s.mb) if s.mb else "")


def l3_mask_from_percent(cbm_mask: int, start: int, end: int, min_cbm_bits: int = 1) -> int:
    """The ways ``[ceil(ways*start/100), ceil(ways*end/100))`` of ``cbm_mask`` as a contiguous mask.

    ``cbm_mask`` must be ``2^k - 1``; ``0 <= start < end <= 100``; the result must hold at least
    ``min_cbm_bits`` ways (the kernel refuses smaller masks).
    """
    if cbm_mask <= 0 or cbm_mask & (cbm_mask + 1):
        raise InvalidValue("L3", hex(cbm_mask), "cbm_mask must be 2^k-1")
    if not 0 <= start < end <= 100:
        raise InvalidValue("L3", f"{start}-{end}", "need 0 <= start < end <= 100")
    ways = cbm_mask.bit_length()
    start_way = -(-ways * start // 100)
    end_way = -(-ways * end // 100)
    if end_way - start_way < max(min_cbm_bits, 1):
        raise InvalidValue("L3", f"{start}-{end}", f"fewer than {max(min_cbm_bits, 1)} cache ways")
    return (1 << end_way) - (1 << start_way)


def mba_intel(percent: int, gran: int = 10, min_bw: int = 10) -> int:
    """Intel MBA: ``percent`` rounded UP to a multiple of ``gran``, within ``[min_bw, 100]``."""
    if not 0 < percent <= 100:
        raise InvalidValue("MB", percent, "percent must be in (0, 100]")
    gran = max(gran, 1)
    rounded = -(-percent // gran) * gran
    return max(min(rounded, 100), min_bw)


def mba_amd(percent: int) -> int:
    """AMD MBA in 1/8 GB/s units: 100 % is unlimited; else a share of a 25 GB/s x 8 x 0.8 budget."""
    if not 0 < percent <= 100:
        raise InvalidValue("MB", percent, "percent must be in (0, 100]")
    if percent == 100:
        return AMD_MBA_UNLIMITED
    return int(25 * 8 * 0.8 * percent / 100)


def plan_schemata(paths: HostPaths, l3_percent: tuple[int, int] | None, mb_percent: int | None) -> Schemata:
    """The schemata giving a group ``l3_percent`` of the L3 ways and ``mb_percent`` of the memory bandwidth
    on every cache domain the root group lists (Intel rounds MB up to ``bandwidth_gran``; AMD gets
    absolute units). Raises :class:`InvalidValue` for a range the hardware cannot express."""
    info = read_info(paths)
    root = parse_schemata(files.read_text(schemata_path(paths, "")))
    l3: dict[int, int] = {}
    mb: dict[int, int] = {}
    if l3_percent is not None:
        mask = l3_mask_from_percent(info.cbm_mask, *l3_percent, info.min_cbm_bits)
        l3 = dict.fromkeys(sorted(root.l3), mask)
    if mb_percent is not None and root.mb:
        vendor, _ = read_cpuinfo(paths)
        if vendor == VENDOR_AMD:
            value = mba_amd(mb_percent)
        else:
            value = mba_intel(mb_percent, info.bandwidth_gran or 10, info.min_bandwidth or 10)
        mb = dict.fromkeys(sorted(root.mb), value)
    return Schemata(MappingProxyType(l3), MappingProxyType(mb))


# ---------------------------------------------------------------------------------------------------
# Tasks
# ---------------------------------------------------------------------------------------------------


def parse_tasks(text: str) -> frozenset[int]:
    """A ``tasks`` / ``cgroup.threads`` file: one TID per line."""
    out: set[int] = set()
    for line in text.split():
        if not line.isdecimal():
            raise InvalidValue("tasks", line, "not a TID")
        out.add(int(line))
    return frozenset(out)


def tasks_to_append(in_group: Iterable[int], wanted: Iterable[int]) -> list[int]:
    """TIDs of ``wanted`` not yet in the group, sorted: each is written alone (one TID per write)."""
    present = frozenset(in_group)
    return sorted({t for t in wanted if t > 0 and t not in present})
