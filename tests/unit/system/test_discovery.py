"""Pod discovery over fake cgroupfs, systemd and v2 trees, with hostile and foreign names mixed in."""

from __future__ import annotations

import os

import pytest

from koordlet.api import KubeQOSClass
from koordlet.system.cgroups import CgroupMode
from koordlet.system.discovery import discover_pods
from koordlet.system.podpath import CgroupDriver, CgroupLayout
from tests.support.fakehost import FakeHost

U1 = "11111111-2222-4333-8444-555555555555"
U2 = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
U3 = "01234567-89ab-4cde-8f01-23456789abcd"
U4 = "fedcba98-7654-4321-8fed-cba987654321"
C1, C2 = "c" * 64, "d" * 64


@pytest.mark.parametrize("driver", [CgroupDriver.CGROUPFS, CgroupDriver.SYSTEMD])
@pytest.mark.parametrize("v2", [False, True])
def test_discover_all_tiers(fake_host: FakeHost, driver: CgroupDriver, v2: bool) -> None:
    if v2:
        fake_host.use_cgroup_v2()
    fake_host.with_paths(cgroup_parent="/test-parent")
    layout = CgroupLayout.create(driver, fake_host.paths.cgroup_parent)
    fake_host.container_cgroup(U1, f"containerd://{C1}", KubeQOSClass.GUARANTEED, driver)
    fake_host.container_cgroup(U1, f"containerd://{C2}", KubeQOSClass.GUARANTEED, driver)
    fake_host.pod_cgroup(U2, KubeQOSClass.BURSTABLE, driver)
    fake_host.container_cgroup(U3, f"docker://{C2}", KubeQOSClass.BESTEFFORT, driver)
    # Foreign and hostile entries that must be ignored.
    be = layout.qos_dir(KubeQOSClass.BESTEFFORT)
    fake_host.mkcgroup(None, f"{be}/not-a-pod")
    fake_host.mkcgroup(None, f"{layout.pod_dir(U3, KubeQOSClass.BESTEFFORT)}/garbage..scope")
    cpu_root = fake_host.subsystem_dir("cpu")
    os.symlink(fake_host.root, cpu_root / be / layout.pod_dir_name(U4, KubeQOSClass.BESTEFFORT))

    pods = discover_pods(fake_host.paths, fake_host.mode, layout)
    assert [(p.uid, p.kube_qos) for p in pods] == [
        (U1, KubeQOSClass.GUARANTEED),
        (U2, KubeQOSClass.BURSTABLE),
        (U3, KubeQOSClass.BESTEFFORT),
    ]
    assert pods[0].cgroup_dir == layout.pod_dir(U1, KubeQOSClass.GUARANTEED)
    assert sorted(c.container_id for c in pods[0].containers) == [C1, C2]
    assert pods[1].containers == ()
    (c3,) = pods[2].containers
    assert c3.container_id == C2
    assert c3.cgroup_dir == layout.container_dir(U3, KubeQOSClass.BESTEFFORT, f"docker://{C2}")
    assert c3.runtime == ("docker" if driver is CgroupDriver.SYSTEMD else "")


def test_empty_tree(fake_host: FakeHost) -> None:
    assert discover_pods(fake_host.paths, CgroupMode.V1, CgroupLayout.create(CgroupDriver.SYSTEMD)) == []
