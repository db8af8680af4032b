"""The kernel's cpu-list syntax for the host layer: the one implementation lives in the plugin contract
(``koordlet.api``), because plugins parse and write cpusets too; this module names it for ``system``.

The kernel prints lists canonically (ascending, ranges collapsed, comma separated); ``format_cpuset``
produces exactly that form so a written value can be compared with what is read back.
"""

from __future__ import annotations

from koordlet.api import MAX_CPU_ID, format_cpuset, parse_cpuset

__all__ = ["MAX_CPU_ID", "format_cpuset", "parse_cpuset"]
