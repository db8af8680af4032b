"""A simulated node topology written as the host files the agent reads: sysfs CPU and NUMA topology,
``/proc/cpuinfo`` and ``/proc/meminfo`` (``koordshared.testing.topology.SimulatedTopology`` describes it).

:func:`write_topology` lays it out under a root directory and returns the :class:`HostPaths` that point the
agent's readers there, so the node topology report (and anything reading CPU topology) can be checked on
2-socket, multi-NUMA, SMT machines this host is not.
"""

from __future__ import annotations

from pathlib import Path

from koordlet.system.paths import HostPaths
from koordshared.apis.meta.cpulist import format_cpuset
from koordshared.testing.topology import SimulatedTopology


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def write_topology(root: Path, topo: SimulatedTopology, *, no_turbo: int | None = 0) -> HostPaths:
    """Write ``topo`` under ``root`` (``sys/``, ``proc/``, ``var/lib/kubelet``); ``no_turbo`` is
    ``intel_pstate/no_turbo`` (``None``: no intel_pstate driver)."""
    sys_root, proc_root = root / "sys", root / "proc"
    cpu_dir = sys_root / "devices" / "system" / "cpu"
    node_dir = sys_root / "devices" / "system" / "node"
    details = topo.cpu_details()
    _write(cpu_dir / "online", format_cpuset(c.id for c in details) + "\n")
    if no_turbo is not None:
        _write(cpu_dir / "intel_pstate" / "no_turbo", f"{no_turbo}\n")
    cpuinfo = []
    for c in details:
        base = cpu_dir / f"cpu{c.id}"
        _write(base / "topology" / "core_id", f"{topo.local_core_id(c.id)}\n")
        _write(base / "topology" / "physical_package_id", f"{c.socket}\n")
        _write(base / "topology" / "thread_siblings_list", format_cpuset(topo.siblings(c.id)) + "\n")
        (base / f"node{c.node}").mkdir(parents=True, exist_ok=True)
        cpuinfo.append(
            f"processor\t: {c.id}\nvendor_id\t: {topo.vendor}\nmodel name\t: {topo.model}\n"
            f"physical id\t: {c.socket}\ncore id\t\t: {topo.local_core_id(c.id)}\n"
        )
    _write(proc_root / "cpuinfo", "\n".join(cpuinfo))
    for numa in range(topo.numa_nodes):
        d = node_dir / f"node{numa}"
        kb = topo.memory_per_numa // 1024
        _write(d / "cpulist", topo.numa_cpulist(numa) + "\n")
        _write(
            d / "meminfo", f"Node {numa} MemTotal:       {kb} kB\nNode {numa} MemFree:        {kb // 2} kB\n"
        )
        for size_kb, pages in ((2048, topo.hugepages_2m_per_numa), (1048576, topo.hugepages_1g_per_numa)):
            _write(d / "hugepages" / f"hugepages-{size_kb}kB" / "nr_hugepages", f"{pages}\n")
    total_kb = topo.numa_nodes * topo.memory_per_numa // 1024
    _write(proc_root / "meminfo", f"MemTotal:       {total_kb} kB\nMemFree:        {total_kb // 2} kB\n")
    kubelet = root / "var" / "lib" / "kubelet"
    kubelet.mkdir(parents=True, exist_ok=True)
    return HostPaths(
        cgroup_root=root / "cgroup",
        proc_root=proc_root,
        sys_root=sys_root,
        sys_fs_root=sys_root / "fs",
        var_run_root=root / "var" / "run",
        var_lib_kubelet=kubelet,
    )
