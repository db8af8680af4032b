"""``Host``: the agent's read view of this machine (implements :class:`koordlet.api.HostReader`).

Built once from :class:`HostPaths`, with the cgroup mode and driver detected (or given, in tests). Reads
go through the resource table, so callers name resources as Koordinator does and get v1-style values on
either cgroup version. A cgroup that vanishes mid-read (pod deleted) reads as ``None``, never an error.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Sequence

from koordlet.api import CPUInfo, KubeQOSClass
from koordlet.api.errors import CgroupGone, ResourceUnsupported, UnsafePath
from koordlet.system import blkio, files, resctrl
from koordlet.system.cgroups import (
    CgroupMode,
    cgroup_dir_path,
    detect_mode,
    from_kernel,
    resource_path,
)
from koordlet.system.paths import HostPaths
from koordlet.system.podpath import CgroupDriver, CgroupLayout, detect_driver
from koordlet.system.probes import supports_resource
from koordlet.system.topology import read_cpu_topology, read_online_cpus


class Host:
    """Host facts and cgroup reads for one set of :class:`HostPaths`; thread-safe."""

    def __init__(
        self, paths: HostPaths, mode: CgroupMode | None = None, driver: CgroupDriver | None = None
    ) -> None:
        self.paths = paths
        self.mode = mode if mode is not None else detect_mode(paths)
        self.driver = driver if driver is not None else detect_driver(paths, self.mode)
        self.layout = CgroupLayout.create(self.driver, paths.cgroup_parent)
        self._lock = threading.Lock()
        self._supports: dict[str, bool] = {}
        self._topology: tuple[frozenset[int], tuple[CPUInfo, ...]] | None = None

    def __repr__(self) -> str:
        return (
            f"Host(cgroup_root={str(self.paths.cgroup_root)!r}, mode={self.mode.name}, driver={self.driver})"
        )

    # HostReader -------------------------------------------------------------------------------------

    def cgroup_version(self) -> int:
        return self.mode.value

    def cpu_topology(self) -> Sequence[CPUInfo]:
        """The topology, read again only when the online CPUs change (one small file a call instead of
        three per CPU: the suppress plugin asks every second)."""
        online = read_online_cpus(self.paths)
        with self._lock:
            cached = self._topology
        if cached is not None and cached[0] == online:
            return cached[1]
        topology = tuple(read_cpu_topology(self.paths))
        with self._lock:
            self._topology = (online, topology)
        return topology

    def supports(self, resource: str) -> bool:
        """Whether the kernel has the file of ``resource`` (probed once at the root, then cached)."""
        with self._lock:
            cached = self._supports.get(resource)
        if cached is not None:
            return cached
        found = supports_resource(self.paths, self.mode, resource)
        with self._lock:
            self._supports[resource] = found
        return found

    def qos_cgroup_dir(self, qos: KubeQOSClass) -> str:
        return self.layout.qos_dir(qos)

    def read(self, resource: str, cgroup_dir: str) -> str | None:
        """The v1-style value, ``None`` when the cgroup is gone.

        Raises :class:`ResourceUnsupported` when the cgroup exists but the kernel lacks the file,
        :class:`UnsafePath` for a dir outside the root and :class:`InvalidValue` for unparsable content.
        """
        raw = self.read_raw(resource, cgroup_dir)
        return None if raw is None else from_kernel(resource, self.mode, raw)

    def read_raw(self, resource: str, cgroup_dir: str) -> str | None:
        """The kernel file's text as is (for the stat parsers), ``None`` when the cgroup is gone."""
        try:
            return self.read_or_raise(resource, cgroup_dir)
        except CgroupGone:
            return None

    def read_or_raise(self, resource: str, cgroup_dir: str) -> str:
        """Like :meth:`read_raw` but a vanished cgroup raises :class:`CgroupGone`."""
        path = resource_path(self.paths, self.mode, resource, cgroup_dir, for_read=True)
        try:
            return files.read_text(path)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise UnsafePath(f"{path} is a symlink") from err
            if err.errno not in files.GONE_ERRNOS:
                raise
            if err.errno == errno.ENOENT and path.parent.is_dir():
                raise ResourceUnsupported(f"{path.name} missing in an existing cgroup ({resource})") from err
            raise CgroupGone(f"{cgroup_dir}: {err.strerror}") from err

    def list_cgroups(self, cgroup_dir: str, depth: int) -> Sequence[str]:
        """``cgroup_dir`` and its sub-dirs down to ``depth`` levels (parents first, names sorted) in the
        cpu hierarchy; symlinks are not followed; an absent ``cgroup_dir`` gives ``[]``."""
        return self.list_cgroups_in("cpu", cgroup_dir, depth)

    def block_device(self, name: str) -> str:
        """``major:minor`` of the disk ``name`` (resolved in sysfs; a partition gives its disk)."""
        return str(blkio.resolve_device_name(self.paths, name))

    def resctrl_unsupported(self) -> str | None:
        return resctrl.control_unsupported(self.paths)

    # Extras -----------------------------------------------------------------------------------------

    def list_cgroups_in(self, subsystem: str, cgroup_dir: str, depth: int) -> list[str]:
        top = cgroup_dir.rstrip("/")
        if not cgroup_dir_path(self.paths, self.mode, subsystem, top).is_dir():
            return []
        out = [top]
        level = [top]
        for _ in range(max(depth, 0)):
            nxt: list[str] = []
            for rel in level:
                for name in self._subdirs(subsystem, rel):
                    nxt.append(f"{rel}/{name}" if rel else name)
            out.extend(nxt)
            level = nxt
        return out

    def _subdirs(self, subsystem: str, rel: str) -> list[str]:
        try:
            with os.scandir(cgroup_dir_path(self.paths, self.mode, subsystem, rel)) as entries:
                return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
        except (FileNotFoundError, NotADirectoryError):
            return []  # removed between listing its parent and scanning it
