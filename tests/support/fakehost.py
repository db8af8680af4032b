"""FakeHost: a throw-away host tree (cgroup v1/v2, procfs, sysfs, resctrl) under ``tmp_path``.

koordlet's ``FileTestUtil`` without globals: everything is reached through ``fake.paths`` (a
:class:`HostPaths` rooted in the tmp dir), which tests inject into the code under test.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from koordlet.api import KubeQOSClass
from koordlet.api.cpulist import format_cpuset
from koordlet.system.cgroups import CgroupMode, get_resource, resource_path
from koordlet.system.host import Host
from koordlet.system.paths import HostPaths
from koordlet.system.podpath import CgroupDriver, CgroupLayout

V1_SUBSYSTEMS = ("cpu", "cpuacct", "cpuset", "memory", "blkio", "net_cls", "perf_event")
V2_CONTROLLERS = "cpuset cpu io memory hugetlb pids"


class FakeHost:
    """A fake host under ``tmp_path``: ``cgroup/``, ``proc/``, ``sys/``, ``sys/fs/resctrl``."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path
        self.paths = HostPaths(
            cgroup_root=tmp_path / "cgroup",
            proc_root=tmp_path / "proc",
            sys_root=tmp_path / "sys",
            sys_fs_root=tmp_path / "sys" / "fs",
            var_run_root=tmp_path / "var" / "run",
        )
        self.mode = CgroupMode.V1
        for p in (self.paths.proc_root, self.paths.sys_root, self.paths.sys_fs_root):
            p.mkdir(parents=True, exist_ok=True)
        for sub in V1_SUBSYSTEMS:
            (self.paths.cgroup_root / sub).mkdir(parents=True, exist_ok=True)

    # Generic files ----------------------------------------------------------------------------------

    def with_paths(self, **changes: object) -> HostPaths:
        """``self.paths`` with some fields replaced (e.g. ``cgroup_parent``, ``cgroup_driver``)."""
        self.paths = dataclasses.replace(self.paths, **changes)  # type: ignore[arg-type]
        return self.paths

    def path(self, rel: str) -> Path:
        return self.root / rel

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def read(self, rel: str) -> str:
        return (self.root / rel).read_text()

    # Cgroups ----------------------------------------------------------------------------------------

    def use_cgroup_v2(self) -> FakeHost:
        """Switch to a unified tree: ``cgroup.controllers`` at the root (how detection tells v2)."""
        for sub in V1_SUBSYSTEMS:
            d = self.paths.cgroup_root / sub
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()
        (self.paths.cgroup_root / "cgroup.controllers").write_text(V2_CONTROLLERS + "\n")
        self.mode = CgroupMode.V2
        return self

    def mkcgroup(self, subsystem: str | None, cgroup_dir: str) -> None:
        """Create ``cgroup_dir`` in one v1 subsystem, in all of them (``None``), or in the v2 tree."""
        if self.mode is CgroupMode.V2:
            (self.paths.cgroup_root / cgroup_dir).mkdir(parents=True, exist_ok=True)
            return
        for sub in V1_SUBSYSTEMS if subsystem is None else (subsystem,):
            (self.paths.cgroup_root / sub / cgroup_dir).mkdir(parents=True, exist_ok=True)

    def write_cgroup(self, resource: str, cgroup_dir: str, value: str) -> Path:
        """Write ``value`` verbatim (kernel form for the current mode) into the resource's file; on v2 the
        ``*.effective`` read file gets it too, as the kernel would show it."""
        path = resource_path(self.paths, self.mode, resource, cgroup_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n" if value and not value.endswith("\n") else value)
        read_path = resource_path(self.paths, self.mode, resource, cgroup_dir, for_read=True)
        if read_path != path:
            read_path.write_text(path.read_text())
        return path

    def read_cgroup(self, resource: str, cgroup_dir: str) -> str:
        return resource_path(self.paths, self.mode, resource, cgroup_dir).read_text().strip()

    def enable_feature(self, resource: str, value: str = "0") -> None:
        """Make the kernel "offer" ``resource``: its file at the hierarchy root (v1) or in a child (v2)."""
        if self.mode is CgroupMode.V2:
            self.mkcgroup(None, "init.scope")
            self.write_cgroup(resource, "init.scope", value)
        else:
            self.write_cgroup(resource, "", value)

    def host(self, driver: CgroupDriver = CgroupDriver.CGROUPFS) -> Host:
        """The agent's view of this tree."""
        return Host(self.paths, self.mode, driver)

    def layout(self, driver: CgroupDriver = CgroupDriver.CGROUPFS) -> CgroupLayout:
        return CgroupLayout.create(driver, self.paths.cgroup_parent)

    def pod_cgroup(
        self,
        uid: str,
        qos: KubeQOSClass = KubeQOSClass.BESTEFFORT,
        driver: CgroupDriver = CgroupDriver.CGROUPFS,
    ) -> str:
        """Create the pod dir (and its tier) in every subsystem; returns the dir relative to a root."""
        pod_dir = self.layout(driver).pod_dir(uid, qos)
        self.mkcgroup(None, pod_dir)
        return pod_dir

    def container_cgroup(
        self,
        uid: str,
        container_id: str,
        qos: KubeQOSClass = KubeQOSClass.BESTEFFORT,
        driver: CgroupDriver = CgroupDriver.CGROUPFS,
    ) -> str:
        """``container_id`` is ``<runtime>://<64 hex>`` (a bare ID works for cgroupfs)."""
        cdir = self.layout(driver).container_dir(uid, qos, container_id)
        self.mkcgroup(None, cdir)
        return cdir

    def write_memory_stat(self, cgroup_dir: str, **values: int) -> None:
        """memory.stat with the v1 ``total_*`` keys (v1) or the v2 keys; unspecified keys are 0."""
        v1 = self.mode is CgroupMode.V1
        keys = ("cache", "rss", "active_anon", "inactive_anon", "active_file", "inactive_file", "unevictable")
        lines = []
        for k in keys:
            name = k if not v1 else f"total_{k}"
            if not v1 and k in ("cache", "rss"):
                name = "file" if k == "cache" else "anon"
            lines.append(f"{name} {values.get(k, 0)}")
        if v1:
            lines = [line.removeprefix("total_") for line in lines] + lines
        self.write_cgroup("memory.stat", cgroup_dir, "\n".join(lines))

    # procfs -----------------------------------------------------------------------------------------

    def write_proc_stat(
        self,
        user: int = 0,
        nice: int = 0,
        system: int = 0,
        idle: int = 0,
        iowait: int = 0,
        irq: int = 0,
        softirq: int = 0,
        steal: int = 0,
        per_cpu: Sequence[Sequence[int]] = (),
    ) -> None:
        """The aggregate ``cpu`` line from the arguments and ``cpuN`` lines from ``per_cpu`` rows."""
        lines = [f"cpu  {user} {nice} {system} {idle} {iowait} {irq} {softirq} {steal} 0 0"]
        for i, row in enumerate(per_cpu):
            lines.append(f"cpu{i} " + " ".join(str(v) for v in (*row, *([0] * (10 - len(row))))))
        lines += ["intr 12345 0 0", "ctxt 67890", "btime 1700000000", "processes 42"]
        self.write("proc/stat", "\n".join(lines) + "\n")

    def write_meminfo(
        self,
        total_kib: int,
        available_kib: int,
        free_kib: int | None = None,
        extra_kib: Mapping[str, int] | None = None,
    ) -> None:
        fields = {
            "MemTotal": total_kib,
            "MemFree": available_kib if free_kib is None else free_kib,
            "MemAvailable": available_kib,
            "Buffers": 0,
            "Cached": 0,
            **(extra_kib or {}),
        }
        self.write(
            "proc/meminfo",
            "".join(f"{k}:{v:>16} kB\n" for k, v in fields.items()) + "HugePages_Total:       0\n",
        )

    def write_pid_stat(
        self,
        pid: int,
        comm: str = "sleep",
        *,
        utime: int = 0,
        stime: int = 0,
        starttime: int = 100,
        state: str = "S",
        ppid: int = 1,
    ) -> None:
        rest = [
            state,
            ppid,
            pid,
            pid,
            0,
            -1,
            4194304,
            0,
            0,
            0,
            0,
            utime,
            stime,
            0,
            0,
            20,
            0,
            1,
            0,
            starttime,
            1000,
            100,
        ]
        self.write(f"proc/{pid}/stat", f"{pid} ({comm}) " + " ".join(str(v) for v in rest) + "\n")

    def write_pressure(
        self,
        rel: str,
        some: tuple[float, float, float, int],
        full: tuple[float, float, float, int] | None = None,
    ) -> Path:
        def line(kind: str, v: tuple[float, float, float, int]) -> str:
            return f"{kind} avg10={v[0]:.2f} avg60={v[1]:.2f} avg300={v[2]:.2f} total={v[3]}\n"

        return self.write(rel, line("some", some) + (line("full", full) if full else ""))

    # sysfs topology ---------------------------------------------------------------------------------

    def set_online_cpus(
        self,
        cpus: Iterable[int],
        *,
        threads_per_core: int = 1,
        cores_per_socket: int = 0,
        numa_nodes: int = 1,
    ) -> None:
        """Online CPUs and their topology: consecutive ids share a core ``threads_per_core`` at a time
        (ids in order), cores fill sockets of ``cores_per_socket`` (0: one socket), sockets map to nodes."""
        ordered = sorted(set(cpus))
        base = "sys/devices/system/cpu"
        self.write(f"{base}/online", format_cpuset(ordered) + "\n")
        by_node: dict[int, list[int]] = {}
        for i, cpu in enumerate(ordered):
            core = i // threads_per_core
            socket = core // cores_per_socket if cores_per_socket else 0
            node = socket % numa_nodes
            siblings = ordered[core * threads_per_core : (core + 1) * threads_per_core]
            local_core = core % cores_per_socket if cores_per_socket else core
            self.write(f"{base}/cpu{cpu}/topology/core_id", f"{local_core}\n")
            self.write(f"{base}/cpu{cpu}/topology/physical_package_id", f"{socket}\n")
            self.write(f"{base}/cpu{cpu}/topology/thread_siblings_list", format_cpuset(siblings) + "\n")
            (self.root / base / f"cpu{cpu}" / f"node{node}").mkdir(parents=True, exist_ok=True)
            by_node.setdefault(node, []).append(cpu)
        for node, node_cpus in by_node.items():
            self.write(f"sys/devices/system/node/node{node}/cpulist", format_cpuset(node_cpus) + "\n")

    # resctrl ----------------------------------------------------------------------------------------

    def make_resctrl(
        self,
        cbm_mask: int = 0x7FF,
        cache_ids: Sequence[int] = (0,),
        *,
        min_cbm_bits: int = 1,
        num_closids: int = 16,
        mb: bool = True,
        bandwidth_gran: int = 10,
        min_bandwidth: int = 10,
        vendor: str = "GenuineIntel",
        flags: Sequence[str] = ("cat_l3", "mba"),
    ) -> Path:
        """A mounted resctrl with ``info/``, a root schemata covering ``cache_ids`` and a cpuinfo."""
        r = "sys/fs/resctrl"
        self.write(f"{r}/info/L3/cbm_mask", f"{cbm_mask:x}\n")
        self.write(f"{r}/info/L3/min_cbm_bits", f"{min_cbm_bits}\n")
        self.write(f"{r}/info/L3/num_closids", f"{num_closids}\n")
        self.write(f"{r}/info/last_cmd_status", "ok\n")
        lines = ["L3:" + ";".join(f"{c}={cbm_mask:x}" for c in cache_ids)]
        if mb:
            self.write(f"{r}/info/MB/bandwidth_gran", f"{bandwidth_gran}\n")
            self.write(f"{r}/info/MB/min_bandwidth", f"{min_bandwidth}\n")
            lines.append("MB:" + ";".join(f"{c}=100" for c in cache_ids))
        self.write(f"{r}/schemata", "\n".join(lines) + "\n")
        self.write(f"{r}/tasks", "")
        self.write(
            "proc/cpuinfo", f"processor\t: 0\nvendor_id\t: {vendor}\nflags\t\t: fpu {' '.join(flags)}\n\n"
        )
        return self.paths.resctrl_root

    def subsystem_dir(self, subsystem: str) -> Path:
        return self.paths.cgroup_root if self.mode is CgroupMode.V2 else self.paths.cgroup_root / subsystem

    def resource_subsystem(self, resource: str) -> str:
        return get_resource(resource).subsystem


def make_block_device(
    sys: Path, name: str, dev: str, *, parent: Path | None = None, dm_name: str = ""
) -> Path:
    """A block device as sysfs shows it: its dir under devices/, class/block/<name> and dev/block/M:m."""
    node = (parent or sys / "devices" / "virtual" / "block") / name
    node.mkdir(parents=True)
    (node / "dev").write_text(dev + "\n")
    if parent is not None:
        (node / "partition").write_text("1\n")
    if dm_name:
        (node / "dm").mkdir()
        (node / "dm" / "name").write_text(dm_name + "\n")
    for link_dir, link_name in ((sys / "class" / "block", name), (sys / "dev" / "block", dev)):
        link_dir.mkdir(parents=True, exist_ok=True)
        os.symlink(node, link_dir / link_name)
    return node
