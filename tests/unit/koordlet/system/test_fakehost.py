"""FakeHost itself: everything stays under tmp_path and files land where the production code looks."""

from __future__ import annotations

from pathlib import Path

from koordlet.api import KubeQOSClass
from koordlet.system.cgroups import CgroupMode, detect_mode
from koordlet.system.podpath import CgroupDriver
from tests.support.fakehost import V1_SUBSYSTEMS, FakeHost

UID = "12345678-9abc-4def-8123-456789abcdef"


def test_paths_are_rooted_in_tmp(fake_host: FakeHost, tmp_path: Path) -> None:
    p = fake_host.paths
    for root in (p.cgroup_root, p.proc_root, p.sys_root, p.sys_fs_root, p.resctrl_root, p.var_run_root):
        assert root.is_relative_to(tmp_path)
    assert p.resctrl_root == tmp_path / "sys" / "fs" / "resctrl"
    assert fake_host.write("proc/x", "1") == tmp_path / "proc" / "x"
    assert fake_host.read("proc/x") == "1"


def test_write_and_read_cgroup_v1(fake_host: FakeHost) -> None:
    pod = fake_host.pod_cgroup(UID, KubeQOSClass.BURSTABLE)
    for sub in V1_SUBSYSTEMS:
        assert (fake_host.paths.cgroup_root / sub / pod).is_dir()
    path = fake_host.write_cgroup("cpu.cfs_quota_us", pod, "50000")
    assert path == fake_host.paths.cgroup_root / "cpu" / pod / "cpu.cfs_quota_us"
    assert fake_host.read_cgroup("cpu.cfs_quota_us", pod) == "50000"


def test_v2_switch(fake_host: FakeHost) -> None:
    fake_host.use_cgroup_v2()
    assert detect_mode(fake_host.paths) is CgroupMode.V2
    pod = fake_host.pod_cgroup(UID, KubeQOSClass.GUARANTEED, driver=CgroupDriver.SYSTEMD)
    assert (fake_host.paths.cgroup_root / pod).is_dir()
    assert not (fake_host.paths.cgroup_root / "cpu").exists()
    fake_host.write_cgroup("cpu.cfs_quota_us", pod, "max 100000")
    assert (fake_host.paths.cgroup_root / pod / "cpu.max").read_text() == "max 100000\n"
