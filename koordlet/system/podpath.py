"""Pod and container cgroup directories under kubelet's layout (cgroupfs and systemd drivers), both ways.

Pod UIDs and container IDs come from API objects whose status anyone with ``pods/status`` may write, so
they are validated against strict formats BEFORE any path is built; names read back from the tree are
parsed with the same rules, and anything malformed is refused rather than guessed.

Directories are relative to a subsystem root and start with the kubelet ``--cgroup-root`` parent
(``HostPaths.cgroup_parent``, ``/`` by default), e.g. ``kubepods/besteffort/pod<uid>/<id>`` (cgroupfs)
or ``kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid_>.slice/cri-containerd-<id>.scope``.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from koordlet.api import KubeQOSClass
from koordlet.api.errors import UnsafePath
from koordlet.system.cgroups import CgroupMode, cgroup_dir_path, check_cgroup_dir
from koordlet.system.paths import HostPaths
from koordshared.runtime.errors import ConfigError

POD_UID_RE = re.compile(r"^[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}\Z")
CONTAINER_ID_RE = re.compile(r"^[0-9a-f]{64}\Z")
MAX_ID_TEXT = 128
"""Longest accepted raw input (``cri-containerd://`` + 64 hex is 81); longer is refused unparsed."""


class CgroupDriver(enum.StrEnum):
    CGROUPFS = "cgroupfs"
    SYSTEMD = "systemd"


# Runtime (as in containerStatus.containerID "<runtime>://<id>") -> systemd scope name prefix.
RUNTIME_SCOPE_PREFIX: dict[str, str] = {
    "docker": "docker-",
    "containerd": "cri-containerd-",
    "cri-o": "crio-",
    "crio": "crio-",
    "pouch": "pouch-",
}
_SCOPE_RUNTIME = {"docker-": "docker", "cri-containerd-": "containerd", "crio-": "cri-o", "pouch-": "pouch"}

_QOS_CGROUPFS = {
    KubeQOSClass.GUARANTEED: "",
    KubeQOSClass.BURSTABLE: "burstable",
    KubeQOSClass.BESTEFFORT: "besteffort",
}
_SYSTEMD_POD = re.compile(r"^kubepods-(?:(burstable|besteffort)-)?pod([0-9a-f_]{36})\.slice\Z")
_CGROUPFS_POD = re.compile(r"^pod([0-9a-f-]{36})\Z")
_SCOPE = re.compile(r"^(docker-|cri-containerd-|crio-|pouch-)([0-9a-f]{64})\.scope\Z")


def check_pod_uid(uid: str) -> str:
    """``uid`` if it is a lowercase RFC 4122 UUID (as the API server makes them), else :class:`UnsafePath`."""
    if len(uid) > MAX_ID_TEXT or not POD_UID_RE.match(uid):
        raise UnsafePath(f"malformed pod UID {uid[:MAX_ID_TEXT]!r}")
    return uid


def parse_container_id(raw: str) -> tuple[str, str]:
    """``"containerd://<64 hex>"`` -> ``("containerd", "<64 hex>")``; a bare ID gives runtime ``""``.

    Unknown runtimes, wrong lengths and non-hex characters raise :class:`UnsafePath`.
    """
    if len(raw) > MAX_ID_TEXT:
        raise UnsafePath(f"container ID longer than {MAX_ID_TEXT} characters")
    runtime, sep, cid = raw.partition("://")
    if not sep:
        runtime, cid = "", raw
    elif runtime not in RUNTIME_SCOPE_PREFIX:
        raise UnsafePath(f"unknown container runtime {runtime!r}")
    if not CONTAINER_ID_RE.match(cid):
        raise UnsafePath(f"malformed container ID {cid!r}")
    return runtime, cid


@dataclass(frozen=True, slots=True)
class CgroupLayout:
    """Kubelet's cgroup naming for one driver under one parent; every method validates its inputs."""

    driver: CgroupDriver
    parent: str = ""
    """Kubelet's ``--cgroup-root`` without the leading ``/`` (``""`` for the default ``/``)."""

    @classmethod
    def create(cls, driver: CgroupDriver, cgroup_parent: str = "/") -> CgroupLayout:
        return cls(driver, check_cgroup_dir(cgroup_parent.lstrip("/")))

    def _join(self, rel: str) -> str:
        return f"{self.parent}/{rel}" if self.parent else rel

    def kubepods_dir(self) -> str:
        """The kubepods root, which is also the Guaranteed tier."""
        return self._join("kubepods.slice" if self.driver is CgroupDriver.SYSTEMD else "kubepods")

    def qos_dir(self, qos: KubeQOSClass) -> str:
        tier = _QOS_CGROUPFS[qos]
        if not tier:
            return self.kubepods_dir()
        if self.driver is CgroupDriver.SYSTEMD:
            return f"{self.kubepods_dir()}/kubepods-{tier}.slice"
        return f"{self.kubepods_dir()}/{tier}"

    def pod_dir_name(self, uid: str, qos: KubeQOSClass) -> str:
        check_pod_uid(uid)
        if self.driver is CgroupDriver.CGROUPFS:
            return f"pod{uid}"
        tier = _QOS_CGROUPFS[qos]
        # systemd unit names use '-' as the hierarchy separator, so the UID's dashes become '_'.
        middle = f"{tier}-" if tier else ""
        return f"kubepods-{middle}pod{uid.replace('-', '_')}.slice"

    def pod_dir(self, uid: str, qos: KubeQOSClass) -> str:
        return f"{self.qos_dir(qos)}/{self.pod_dir_name(uid, qos)}"

    def container_dir_name(self, container_id: str) -> str:
        """Dir name of a container from ``"<runtime>://<id>"`` (a bare ID works only for cgroupfs)."""
        runtime, cid = parse_container_id(container_id)
        if self.driver is CgroupDriver.CGROUPFS:
            return cid
        if not runtime:
            raise UnsafePath("the systemd driver needs the runtime to name a container scope")
        return f"{RUNTIME_SCOPE_PREFIX[runtime]}{cid}.scope"

    def container_dir(self, uid: str, qos: KubeQOSClass, container_id: str) -> str:
        return f"{self.pod_dir(uid, qos)}/{self.container_dir_name(container_id)}"

    def parse_pod_dir_name(self, name: str) -> str | None:
        """The pod UID from a pod dir name of this driver, or ``None`` for anything else."""
        if len(name) > MAX_ID_TEXT:
            return None
        if self.driver is CgroupDriver.CGROUPFS:
            m = _CGROUPFS_POD.match(name)
            uid = m.group(1) if m else None
        else:
            m = _SYSTEMD_POD.match(name)
            uid = m.group(2).replace("_", "-") if m else None
        return uid if uid is not None and POD_UID_RE.match(uid) else None

    def parse_container_dir_name(self, name: str) -> tuple[str, str] | None:
        """``(runtime, container id)`` from a container dir name (runtime ``""`` under cgroupfs)."""
        if len(name) > MAX_ID_TEXT:
            return None
        if self.driver is CgroupDriver.CGROUPFS:
            return ("", name) if CONTAINER_ID_RE.match(name) else None
        m = _SCOPE.match(name)
        return (_SCOPE_RUNTIME[m.group(1)], m.group(2)) if m else None


def is_container_dir_name(name: str) -> bool:
    """Whether ``name`` names a container's cgroup dir under either driver (``<64 hex>`` or
    ``<runtime>-<64 hex>.scope``)."""
    return len(name) <= MAX_ID_TEXT and bool(CONTAINER_ID_RE.match(name) or _SCOPE.match(name))


def detect_driver(paths: HostPaths, mode: CgroupMode) -> CgroupDriver:
    """From the tree under the cpu subsystem (``kubepods.slice`` -> systemd, ``kubepods`` -> cgroupfs),
    else ``HostPaths.cgroup_driver`` when configured, else systemd (kubelet's recommended driver)."""
    for driver in (CgroupDriver.SYSTEMD, CgroupDriver.CGROUPFS):
        layout = CgroupLayout.create(driver, paths.cgroup_parent)
        if cgroup_dir_path(paths, mode, "cpu", layout.kubepods_dir()).is_dir():
            return driver
    if paths.cgroup_driver:
        try:
            return CgroupDriver(paths.cgroup_driver)
        except ValueError:
            raise ConfigError(f"unknown cgroup driver {paths.cgroup_driver!r}") from None
    return CgroupDriver.SYSTEMD
