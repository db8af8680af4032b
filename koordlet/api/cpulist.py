"""The kernel's cpu-list syntax, defined once in :mod:`koordshared.apis.meta.cpulist` and re-exported for
plugins."""

from __future__ import annotations

from koordshared.apis.meta.cpulist import MAX_CPU_ID, format_cpuset, parse_cpuset

__all__ = ["MAX_CPU_ID", "format_cpuset", "parse_cpuset"]
