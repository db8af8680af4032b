"""Host roots (koordlet's ``system.Conf``): every host path the agent uses starts from one of these.

Defaults are this host's own paths (standalone agent); the DaemonSet passes ``/host-cgroup/`` and friends
as flags, like koordlet's manifest does. Nothing outside this module spells ``/proc`` or ``/sys/fs/cgroup``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_CGROUP_ROOT = "/sys/fs/cgroup"
DEFAULT_PROC_ROOT = "/proc"
DEFAULT_SYS_ROOT = "/sys"
DEFAULT_SYS_FS_ROOT = "/sys/fs"
DEFAULT_VAR_RUN_ROOT = "/var/run"
DEFAULT_VAR_LIB_KUBELET = "/var/lib/kubelet"


@dataclass(frozen=True, slots=True)
class HostPaths:
    """Roots of the host filesystems (each a ``koordlet run`` flag)."""

    cgroup_root: Path = Path(DEFAULT_CGROUP_ROOT)
    """``--cgroup-root-dir``: where cgroup v1 controllers (or the v2 unified tree) are mounted."""
    proc_root: Path = Path(DEFAULT_PROC_ROOT)
    """``--proc-root-dir``."""
    sys_root: Path = Path(DEFAULT_SYS_ROOT)
    """``--sys-root-dir``."""
    sys_fs_root: Path = Path(DEFAULT_SYS_FS_ROOT)
    """``--sys-fs-root-dir``: resctrl is mounted at ``<sys-fs-root>/resctrl``."""
    var_run_root: Path = Path(DEFAULT_VAR_RUN_ROOT)
    """``--var-run-root-dir``: the standalone NodeMetric file goes under ``<var-run>/koordlet``."""
    var_lib_kubelet: Path = Path(DEFAULT_VAR_LIB_KUBELET)
    """``--var-lib-kubelet-dir``: the kubelet's root dir (its CPU manager checkpoint)."""
    cgroup_parent: str = "/"
    """Kubelet's ``--cgroup-root``: the parent of the kubepods tree, relative to each subsystem root."""
    cgroup_driver: str = ""
    """``cgroupfs`` or ``systemd``; empty means detect from the tree."""

    @property
    def resctrl_root(self) -> Path:
        return self.sys_fs_root / "resctrl"

    def proc(self, *parts: str) -> Path:
        """A path under the proc root, e.g. ``proc("stat")``."""
        return self.proc_root.joinpath(*parts)

    def sys(self, *parts: str) -> Path:
        return self.sys_root.joinpath(*parts)

    def kubelet_cpu_manager_state(self) -> Path:
        """The kubelet's CPU manager checkpoint (``{"policyName": "static", ...}``)."""
        return self.var_lib_kubelet / "cpu_manager_state"

    def koordlet_run_dir(self) -> Path:
        """Where the standalone agent writes its NodeMetric file."""
        return self.var_run_root / "koordlet"
