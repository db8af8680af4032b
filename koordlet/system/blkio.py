"""Block I/O control at kernel level: devices as ``major:minor``, and the per-device line formats.

The v1 ``blkio`` controller keeps one file per limit (``blkio.throttle.read_bps_device`` holds lines
``<maj>:<min> <value>``; writing ``<maj>:<min> 0`` removes the device's line). cgroup v2 folds the four
throttles into ``io.max`` (``<maj>:<min> rbps=<n|max> wbps=.. riops=.. wiops=..``; a write names only
the keys it changes and ``max`` removes a limit) and the weights into ``io.weight`` (``default <w>`` plus
``<maj>:<min> <w>`` lines; ``<maj>:<min> default`` removes an override). Koordinator drives v1 only; the
resource table keeps its v1 names and semantics and :func:`to_v2` / :func:`from_v2` translate, so the
same update works on either version. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from koordlet.api.errors import ResourceUnsupported
from koordlet.system.paths import HostPaths
from koordshared.runtime.errors import InvalidValue

THROTTLE_KEYS: Mapping[str, str] = {
    "blkio.throttle.read_bps_device": "rbps",
    "blkio.throttle.write_bps_device": "wbps",
    "blkio.throttle.read_iops_device": "riops",
    "blkio.throttle.write_iops_device": "wiops",
}
"""v1 throttle file -> its key in v2 ``io.max``."""
WEIGHT_RESOURCES = frozenset({"blkio.cost.weight"})
"""Per-device weights (Alibaba/Anolis v1 ``blkio.cost.weight``, 1..100) -> v2 ``io.weight`` lines."""
KV_RESOURCES = frozenset({"blkio.cost.qos", "blkio.cost.model"})
"""Root-only iocost settings, ``<maj>:<min> key=value ...`` (v2 ``io.cost.qos`` / ``io.cost.model``)."""
DEVICE_RESOURCES = frozenset(THROTTLE_KEYS) | WEIGHT_RESOURCES | KV_RESOURCES
"""Resources whose files hold one line per device: a value names its device, and equality, caching
and removal are per device."""

IO_MAX_KEYS = ("rbps", "wbps", "riops", "wiops")
U64_MAX = (1 << 64) - 1

_DEV = re.compile(r"^(\d{1,10}):(\d{1,10})\Z")
_KV = re.compile(r"^[a-z_]{1,16}=[A-Za-z0-9_.]{1,24}\Z")


class DeviceNumber(NamedTuple):
    """A block device's ``major:minor``."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}:{self.minor}"

    @classmethod
    def parse(cls, text: str) -> DeviceNumber:
        m = _DEV.match(text.strip())
        if m is None:
            raise InvalidValue("device", text, "expected '<major>:<minor>'")
        return cls(int(m.group(1)), int(m.group(2)))


# ---------------------------------------------------------------------------------------------------
# Resolution
# ---------------------------------------------------------------------------------------------------


def _sys_block(paths: HostPaths, dev: DeviceNumber) -> Path:
    return paths.sys("dev", "block", str(dev))


def whole_disk(paths: HostPaths, dev: DeviceNumber) -> DeviceNumber:
    """``dev`` itself, or the disk it is a partition of; :class:`ResourceUnsupported` if it is no block
    device the kernel knows (e.g. the anonymous device of an overlay or tmpfs mount)."""
    node = _sys_block(paths, dev)
    if not node.exists():
        raise ResourceUnsupported(f"{dev} is not a block device (no {node})")
    if not (node / "partition").exists():
        return dev
    # <sys>/dev/block/M:m links to .../block/<disk>/<part>; the disk's own "dev" is one level up.
    parent_dev = node.resolve().parent / "dev"
    try:
        return DeviceNumber.parse(parent_dev.read_text())
    except (OSError, InvalidValue) as err:
        raise ResourceUnsupported(f"cannot find the disk of partition {dev}: {err}") from err


def resolve_device_name(paths: HostPaths, name: str) -> DeviceNumber:
    """The disk named ``name`` (``vdb``, ``/dev/vdb``, ``dm-0``, ``/dev/mapper/vg-lv`` or ``vg-lv``).

    Looked up in ``<sys>/class/block`` (then device-mapper names in ``<dev>/dm/name``); a partition
    gives its disk. :class:`ResourceUnsupported` when nothing matches.
    """
    base = name.rstrip("/").rsplit("/", 1)[-1]
    if not base or base in (".", ".."):
        raise ResourceUnsupported(f"bad block device name {name!r}")
    classes = paths.sys("class", "block")
    candidate = classes / base / "dev"
    if not candidate.exists():
        candidate = _dm_by_name(classes, base) or candidate
    try:
        dev = DeviceNumber.parse(candidate.read_text())
    except FileNotFoundError as err:
        raise ResourceUnsupported(f"no block device named {name!r} under {classes}") from err
    return whole_disk(paths, dev)


def _dm_by_name(classes: Path, name: str) -> Path | None:
    try:
        entries = sorted(os.listdir(classes))
    except FileNotFoundError:
        return None
    for entry in entries:
        try:
            if (classes / entry / "dm" / "name").read_text().strip() == name:
                return classes / entry / "dev"
        except OSError:
            continue
    return None


# ---------------------------------------------------------------------------------------------------
# v1 formats: "<maj>:<min> <value>" lines
# ---------------------------------------------------------------------------------------------------


def parse_device_values(text: str, resource: str = "blkio") -> dict[DeviceNumber, int]:
    """``<maj>:<min> <int>`` lines; other lines (bfq's ``default 100``) are skipped."""
    out: dict[DeviceNumber, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 2 or not _DEV.match(fields[0]):
            continue
        try:
            out[DeviceNumber.parse(fields[0])] = int(fields[1])
        except ValueError as err:
            raise InvalidValue(resource, line, "non-integer device value") from err
    return out


def split_device_value(text: str, resource: str = "blkio") -> tuple[DeviceNumber, str]:
    """``(device, rest)`` of one ``<maj>:<min> <rest>`` value."""
    head, _, rest = text.strip().partition(" ")
    if not _DEV.match(head):
        raise InvalidValue(resource, text, "expected '<major>:<minor> <value>'")
    return DeviceNumber.parse(head), rest.strip()


def parse_device_kv(text: str, resource: str = "blkio") -> dict[DeviceNumber, dict[str, str]]:
    """``<maj>:<min> key=value ...`` lines (iocost qos/model, v2 ``io.max``)."""
    out: dict[DeviceNumber, dict[str, str]] = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields or not _DEV.match(fields[0]):
            continue
        pairs: dict[str, str] = {}
        for item in fields[1:]:
            key, sep, value = item.partition("=")
            if not sep:
                raise InvalidValue(resource, line, f"bad key=value item {item!r}")
            pairs[key] = value
        out[DeviceNumber.parse(fields[0])] = pairs
    return out


def check_kv_value(resource: str, text: str) -> str:
    """A normalized ``<maj>:<min> key=value ...`` value (one device, at least one pair)."""
    fields = text.split()
    if len(fields) < 2 or not _DEV.match(fields[0]) or not all(_KV.match(f) for f in fields[1:]):
        raise InvalidValue(resource, text, "expected '<major>:<minor> key=value ...'")
    return " ".join([str(DeviceNumber.parse(fields[0])), *fields[1:]])


# ---------------------------------------------------------------------------------------------------
# v2 formats and the v1 <-> v2 translation
# ---------------------------------------------------------------------------------------------------


def parse_io_max(text: str) -> dict[DeviceNumber, dict[str, int | None]]:
    """``io.max``: per device, each of rbps/wbps/riops/wiops as an integer or ``None`` (``max``)."""
    out: dict[DeviceNumber, dict[str, int | None]] = {}
    for dev, pairs in parse_device_kv(text, "io.max").items():
        limits: dict[str, int | None] = dict.fromkeys(IO_MAX_KEYS)
        for key, value in pairs.items():
            if key not in limits:
                continue
            if value == "max":
                continue
            if not value.isdecimal():
                raise InvalidValue("io.max", text[:200], f"bad {key}={value}")
            limits[key] = int(value)
        out[dev] = limits
    return out


def render_io_max(dev: DeviceNumber, key: str, value: int) -> str:
    """One ``io.max`` write changing one limit; ``0`` removes it (``max``), as v1's ``0`` does."""
    if key not in IO_MAX_KEYS:
        raise InvalidValue("io.max", key, f"key must be one of {IO_MAX_KEYS}")
    if value < 0:
        raise InvalidValue("io.max", value, "limits are non-negative (0 removes)")
    return f"{dev} {key}={'max' if value == 0 else value}"


def parse_io_weight(text: str) -> tuple[int | None, dict[DeviceNumber, int]]:
    """``io.weight`` (or ``io.bfq.weight``): ``(default, per-device overrides)``."""
    default: int | None = None
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == "default" and fields[1].isdecimal():
            default = int(fields[1])
    return default, parse_device_values(text, "io.weight")


def render_io_weight(dev: DeviceNumber, weight: int) -> str:
    """A per-device ``io.weight`` override (1..10000); ``0`` removes it (``default``)."""
    if weight == 0:
        return f"{dev} default"
    if not 1 <= weight <= 10000:
        raise InvalidValue("io.weight", weight, "outside [1, 10000] (0 removes)")
    return f"{dev} {weight}"


def to_v2(resource: str, value: str) -> tuple[str, str]:
    """``(v2 file, text)`` for a normalized v1 ``value`` of a device resource."""
    if resource in THROTTLE_KEYS:
        dev, rest = split_device_value(value, resource)
        return "io.max", render_io_max(dev, THROTTLE_KEYS[resource], int(rest))
    if resource in WEIGHT_RESOURCES:
        dev, rest = split_device_value(value, resource)
        # blkio.cost.weight is a percent of the default weight; io.weight's default is 100, so the
        # percent is the weight itself and 100 % means "as the default".
        return "io.weight", render_io_weight(dev, int(rest))
    if resource in KV_RESOURCES:
        return resource.replace("blkio.", "io.", 1), value
    raise ResourceUnsupported(f"{resource} is not a block device resource")


def from_v2(resource: str, raw: str) -> str:
    """The v1-format text (``<maj>:<min> <value>`` lines) of ``resource`` from a v2 file's text."""
    if resource in THROTTLE_KEYS:
        key = THROTTLE_KEYS[resource]
        lines = [f"{dev} {lim[key]}" for dev, lim in parse_io_max(raw).items() if lim[key] is not None]
        return "\n".join(lines)
    if resource in WEIGHT_RESOURCES:
        _, weights = parse_io_weight(raw)
        return "\n".join(f"{dev} {w}" for dev, w in weights.items())
    return raw.strip()


# ---------------------------------------------------------------------------------------------------
# Per-device state (comparison, stale devices)
# ---------------------------------------------------------------------------------------------------


def device_entry(resource: str, current_text: str, dev: DeviceNumber) -> str:
    """What ``current_text`` (v1 format) holds for ``dev``, as a comparable string; a device without a
    line holds ``0`` (v1 throttles and weights: no limit / the default)."""
    if resource in KV_RESOURCES:
        pairs = parse_device_kv(current_text, resource).get(dev)
        return " ".join(f"{k}={v}" for k, v in sorted(pairs.items())) if pairs else ""
    return str(parse_device_values(current_text, resource).get(dev, 0))


def same_device_value(resource: str, current_text: str, value: str) -> bool:
    """Whether the device named in ``value`` already has that value in ``current_text``.

    For key=value settings only the keys named in ``value`` are compared (a write changes only those).
    """
    dev, rest = split_device_value(value, resource)
    if resource in KV_RESOURCES:
        have = parse_device_kv(current_text, resource).get(dev, {})
        want = parse_device_kv(value, resource).get(dev, {})
        return all(_same_setting(have.get(k), v) for k, v in want.items())
    return device_entry(resource, current_text, dev) == str(int(rest))


def _same_setting(have: str | None, want: str) -> bool:
    """One key=value setting: equal text, or equal numbers (the kernel shows ``rpct=95`` as ``95.00``)."""
    if have is None or have == want:
        return have == want
    try:
        return float(have) == float(want)
    except ValueError:
        return False
