"""NUMA nodes and CPU facts from sysfs and procfs, for the node topology report.

Per NUMA node: ``MemTotal`` of ``<sys>/devices/system/node/node<N>/meminfo`` and the huge pages reserved
there (``hugepages/hugepages-<size>kB/nr_hugepages``), as koordlet's ``GetNodeNUMAInfo`` and
``GetNodeHugePagesInfo`` read them. A kernel without NUMA support has no node dirs: the host is one node 0
with ``/proc/meminfo``'s total. CPU basic info is koordlet's ``getCPUBasicInfo``: model and vendor from
``/proc/cpuinfo``, SMT from the topology, turbo from ``intel_pstate/no_turbo``, the L3 mask from resctrl.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from koordlet.api import CPUInfo
from koordlet.system.paths import HostPaths
from koordlet.system.procfs import read_meminfo

_NODE_DIR = re.compile(r"^node(\d{1,6})\Z")
_HUGEPAGE_DIR = re.compile(r"^hugepages-(\d{1,12})kB\Z")
HUGEPAGE_2M_KB = 2048
HUGEPAGE_1G_KB = 1048576


@dataclass(frozen=True, slots=True)
class NUMANodeMemory:
    """One NUMA node's memory: ``MemTotal`` and its huge pages by page size (kB -> pages)."""

    node: int
    total_bytes: int
    hugepages: Mapping[int, int] = field(default_factory=dict)

    def hugepage_bytes(self, size_kb: int) -> int:
        return self.hugepages.get(size_kb, 0) * size_kb * 1024


def numa_dir(paths: HostPaths) -> Path:
    return paths.sys("devices", "system", "node")


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _hugepages(node_dir: Path) -> dict[int, int]:
    out: dict[int, int] = {}
    try:
        names = os.listdir(node_dir / "hugepages")
    except OSError:
        return out
    for name in names:
        m = _HUGEPAGE_DIR.match(name)
        pages = _read_int(node_dir / "hugepages" / name / "nr_hugepages") if m else None
        if m and pages is not None:
            out[int(m.group(1))] = pages
    return out


def _memtotal_kb(meminfo: str) -> int | None:
    """``Node <n> MemTotal: <kB> kB`` of a node's ``meminfo``."""
    for line in meminfo.splitlines():
        fields = line.split()
        if len(fields) == 5 and fields[0] == "Node" and fields[2] == "MemTotal:" and fields[4] == "kB":
            return int(fields[3]) if fields[3].isdecimal() else None
    return None


def read_numa_memory(paths: HostPaths) -> list[NUMANodeMemory]:
    """Every NUMA node's memory, sorted by id; one node 0 from ``/proc/meminfo`` when sysfs has none."""
    base = numa_dir(paths)
    try:
        names = os.listdir(base)
    except OSError:
        names = []
    nodes = []
    for name in names:
        m = _NODE_DIR.match(name)
        if m is None:
            continue
        try:
            text = (base / name / "meminfo").read_text()
        except OSError:
            continue  # a memoryless or offline node: nothing to report for it
        total = _memtotal_kb(text)
        if total is None:
            continue
        nodes.append(NUMANodeMemory(int(m.group(1)), total * 1024, _hugepages(base / name)))
    if not nodes:
        return [NUMANodeMemory(0, read_meminfo(paths).total)]
    return sorted(nodes, key=lambda n: n.node)


@dataclass(frozen=True, slots=True)
class CPUFacts:
    """What ``cpu-basic-info`` says about the processors."""

    model: str = ""
    vendor: str = ""
    hyper_threading: bool = False
    turbo: bool = False
    l3_cbm_mask: str = ""


def _cpuinfo_field(text: str, key: str) -> str:
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == key:
            return value.strip()
    return ""


def read_cpu_facts(paths: HostPaths, cpus: Sequence[CPUInfo]) -> CPUFacts:
    try:
        cpuinfo = paths.proc("cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    no_turbo = _read_int(paths.sys("devices", "system", "cpu", "intel_pstate", "no_turbo"))
    try:
        mask = (paths.resctrl_root / "info" / "L3" / "cbm_mask").read_text().strip()
    except OSError:
        mask = ""
    cores = [c.core for c in cpus]
    return CPUFacts(
        model=_cpuinfo_field(cpuinfo, "model name"),
        vendor=_cpuinfo_field(cpuinfo, "vendor_id"),
        hyper_threading=len(set(cores)) < len(cores),
        turbo=no_turbo == 0,
        l3_cbm_mask=mask,
    )
