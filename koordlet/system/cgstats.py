"""Parsers for cgroup statistics files: ``memory.stat``, ``cpu.stat`` and ``cpuacct.usage``, v1 and v2.

They take file text and return typed values in v1 units (bytes, nanoseconds) whatever the version, so a
collector computes the same figure from either; missing keys or non-integers raise :class:`InvalidValue`.
"""

from __future__ import annotations

from dataclasses import dataclass

from koordshared.runtime.errors import InvalidValue


def parse_flat_keyed(text: str, resource: str) -> dict[str, int]:
    """``key value`` lines (the format of memory.stat and cpu.stat) into a dict."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2:
            raise InvalidValue(resource, line, "expected 'key value'")
        try:
            out[fields[0]] = int(fields[1])
        except ValueError as err:
            raise InvalidValue(resource, line, "non-integer value") from err
    return out


@dataclass(frozen=True, slots=True)
class MemoryStat:
    """memory.stat in bytes; on v1 the hierarchical ``total_*`` keys (the cgroup and its children)."""

    cache: int
    rss: int
    active_anon: int
    inactive_anon: int
    active_file: int
    inactive_file: int
    unevictable: int

    @property
    def usage(self) -> int:
        """koordlet's working-set usage: anon (active + inactive) + unevictable; page cache excluded."""
        return self.active_anon + self.inactive_anon + self.unevictable


_MEM_V1 = (
    "total_cache",
    "total_rss",
    "total_active_anon",
    "total_inactive_anon",
    "total_active_file",
    "total_inactive_file",
    "total_unevictable",
)
_MEM_V2 = ("file", "anon", "active_anon", "inactive_anon", "active_file", "inactive_file", "unevictable")


def parse_memory_stat(text: str) -> MemoryStat:
    """v1 when ``total_inactive_anon`` is present, else v2 keys (``anon``, ``file``...)."""
    values = parse_flat_keyed(text, "memory.stat")
    keys = _MEM_V1 if "total_inactive_anon" in values else _MEM_V2
    missing = [k for k in keys if k not in values]
    if missing:
        raise InvalidValue("memory.stat", text[:200], f"missing keys {missing}")
    return MemoryStat(*(values[k] for k in keys))


@dataclass(frozen=True, slots=True)
class CPUStat:
    """CFS bandwidth statistics; ``usage_ns`` only on v2 (v1 keeps usage in ``cpuacct.usage``)."""

    nr_periods: int
    nr_throttled: int
    throttled_ns: int
    usage_ns: int | None = None


def parse_cpu_stat(text: str) -> CPUStat:
    """v1 ``throttled_time`` is ns; v2 ``throttled_usec``/``usage_usec`` are converted to ns."""
    values = parse_flat_keyed(text, "cpu.stat")
    if "throttled_time" in values:
        throttled = values["throttled_time"]
    elif "throttled_usec" in values:
        throttled = values["throttled_usec"] * 1000
    else:
        throttled = None
    usage = values["usage_usec"] * 1000 if "usage_usec" in values else None
    # A v2 cgroup without the cpu controller enabled has only usage/user/system lines: no throttling.
    if throttled is None and usage is not None and "nr_periods" not in values:
        return CPUStat(0, 0, 0, usage)
    if throttled is None or "nr_periods" not in values or "nr_throttled" not in values:
        raise InvalidValue("cpu.stat", text[:200], "missing nr_periods/nr_throttled/throttled time")
    return CPUStat(values["nr_periods"], values["nr_throttled"], throttled, usage)


def parse_cpuacct_usage(text: str) -> int:
    """``cpuacct.usage`` (v1): cumulative CPU time in nanoseconds."""
    stripped = text.strip()
    if not stripped.isdecimal():
        raise InvalidValue("cpuacct.usage", text[:100], "not a non-negative integer")
    return int(stripped)


def parse_cpu_usage_ns(text: str, *, v2: bool) -> int:
    """A cgroup's cumulative CPU time in ns: v1 ``cpuacct.usage`` (ns), v2 ``cpu.stat`` ``usage_usec``."""
    if not v2:
        return parse_cpuacct_usage(text)
    usec = parse_flat_keyed(text, "cpu.stat").get("usage_usec")
    if usec is None:
        raise InvalidValue("cpu.stat", text[:100], "no usage_usec")
    return usec * 1000
