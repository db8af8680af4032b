"""CPU topology from sysfs: online CPUs, core/socket/NUMA ids and SMT siblings (``lscpu -e`` without lscpu).

Core ids in sysfs are unique only within a package, so :func:`read_cpu_topology` renumbers physical cores
globally (as ``lscpu`` does): two logical CPUs share ``core`` iff they are SMT siblings.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from koordlet.api import CPUInfo
from koordlet.api.cpulist import parse_cpuset
from koordlet.system.paths import HostPaths

_NODE_DIR = re.compile(r"^node(\d+)\Z")


def cpu_sys_dir(paths: HostPaths) -> Path:
    return paths.sys("devices", "system", "cpu")


def read_online_cpus(paths: HostPaths) -> frozenset[int]:
    """``<sys>/devices/system/cpu/online``; a host without the file is taken as uniprocessor CPU 0."""
    try:
        text = (cpu_sys_dir(paths) / "online").read_text()
    except FileNotFoundError:
        return frozenset({0})
    return parse_cpuset(text, resource="cpu/online")


def _read_int(path: Path, default: int) -> int:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return default


def _numa_of(cpu_dir: Path) -> int:
    # Each cpuN dir links to its node as "nodeM"; without NUMA support there is none (node 0).
    try:
        for name in os.listdir(cpu_dir):
            m = _NODE_DIR.match(name)
            if m:
                return int(m.group(1))
    except FileNotFoundError:
        pass
    return 0


def read_cpu_topology(paths: HostPaths) -> list[CPUInfo]:
    """Online logical CPUs sorted by id with global core ids, sockets and NUMA nodes."""
    base = cpu_sys_dir(paths)
    raw: list[tuple[int, int, int, int]] = []
    for cpu in sorted(read_online_cpus(paths)):
        topo = base / f"cpu{cpu}" / "topology"
        socket = max(_read_int(topo / "physical_package_id", 0), 0)
        core = _read_int(topo / "core_id", cpu)
        raw.append((cpu, socket, core, _numa_of(base / f"cpu{cpu}")))
    core_ids: dict[tuple[int, int], int] = {}
    for _, socket, core, _ in sorted(raw, key=lambda r: (r[1], r[2], r[0])):
        core_ids.setdefault((socket, core), len(core_ids))
    return [
        CPUInfo(cpu=cpu, core=core_ids[(socket, core)], socket=socket, node=node)
        for cpu, socket, core, node in raw
    ]
