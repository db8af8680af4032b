"""Pod/container cgroup dirs for both drivers, refusal of unsafe IDs, reverse parsing, driver detection."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from koordlet.api import KubeQOSClass
from koordlet.api.errors import UnsafePath
from koordlet.system.cgroups import CgroupMode
from koordlet.system.host import Host
from koordlet.system.podpath import (
    CgroupDriver,
    CgroupLayout,
    check_pod_uid,
    detect_driver,
    parse_container_id,
)
from koordshared.runtime.errors import ConfigError
from tests.support.fakehost import FakeHost

UID = "6a8e3f4c-1b2d-4e5f-8a9b-0c1d2e3f4a5b"
UID_ = UID.replace("-", "_")
CID = "a1" * 32
G, B, BE = KubeQOSClass.GUARANTEED, KubeQOSClass.BURSTABLE, KubeQOSClass.BESTEFFORT
CGFS = CgroupLayout.create(CgroupDriver.CGROUPFS)
SYSD = CgroupLayout.create(CgroupDriver.SYSTEMD)


@pytest.mark.parametrize(
    ("layout", "qos", "expected"),
    [
        (CGFS, G, "kubepods"),
        (CGFS, B, "kubepods/burstable"),
        (CGFS, BE, "kubepods/besteffort"),
        (SYSD, G, "kubepods.slice"),
        (SYSD, B, "kubepods.slice/kubepods-burstable.slice"),
        (SYSD, BE, "kubepods.slice/kubepods-besteffort.slice"),
    ],
)
def test_qos_dirs(layout: CgroupLayout, qos: KubeQOSClass, expected: str) -> None:
    assert layout.qos_dir(qos) == expected


def test_pod_and_container_dirs() -> None:
    assert CGFS.pod_dir(UID, G) == f"kubepods/pod{UID}"
    assert CGFS.pod_dir(UID, BE) == f"kubepods/besteffort/pod{UID}"
    assert SYSD.pod_dir(UID, G) == f"kubepods.slice/kubepods-pod{UID_}.slice"
    assert SYSD.pod_dir(UID, B) == (
        f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice"
    )
    assert CGFS.container_dir(UID, B, f"containerd://{CID}") == f"kubepods/burstable/pod{UID}/{CID}"
    assert CGFS.container_dir(UID, B, CID).endswith(f"/{CID}")
    for runtime, prefix in [
        ("docker", "docker-"),
        ("containerd", "cri-containerd-"),
        ("cri-o", "crio-"),
        ("pouch", "pouch-"),
    ]:
        assert SYSD.container_dir_name(f"{runtime}://{CID}") == f"{prefix}{CID}.scope"


def test_cgroup_parent_prefixes_everything() -> None:
    layout = CgroupLayout.create(CgroupDriver.CGROUPFS, "/koordlet-test-abc")
    assert layout.pod_dir(UID, BE) == f"koordlet-test-abc/kubepods/besteffort/pod{UID}"
    with pytest.raises(UnsafePath):
        CgroupLayout.create(CgroupDriver.CGROUPFS, "/a/../../etc")


BAD_UIDS = [
    "../../etc",
    f"{UID}/..",
    f"../{UID}",
    UID.upper(),
    UID + "\x00",
    UID.replace("-", "/"),
    UID[:-1],
    UID + "0",
    "x" * 250,
    "",
]
BAD_CONTAINER_IDS = [
    f"containerd://../{CID}",
    f"containerd://{CID[:-1]}/",
    f"containerd://{CID}\x00",
    f"unknown://{CID}",
    f"containerd://{CID}0",
    f"containerd://{CID[:-1]}",
    f"containerd://{CID.upper()}",
    "containerd://" + "a" * 300,
    "../" * 30,
    "",
]


@pytest.mark.parametrize("uid", BAD_UIDS)
def test_bad_pod_uids_refused(uid: str) -> None:
    with pytest.raises(UnsafePath):
        check_pod_uid(uid)
    for layout in (CGFS, SYSD):
        with pytest.raises(UnsafePath):
            layout.pod_dir(uid, BE)


@pytest.mark.parametrize("cid", BAD_CONTAINER_IDS)
def test_bad_container_ids_refused(cid: str) -> None:
    for layout in (CGFS, SYSD):
        with pytest.raises(UnsafePath):
            layout.container_dir(UID, BE, cid)


def test_systemd_needs_the_runtime() -> None:
    with pytest.raises(UnsafePath):
        SYSD.container_dir_name(CID)
    assert parse_container_id(f"docker://{CID}") == ("docker", CID)
    assert parse_container_id(f"cri-o://{CID}") == ("cri-o", CID)


def test_reverse_parsing_roundtrips() -> None:
    for layout in (CGFS, SYSD):
        for qos in (G, B, BE):
            name = layout.pod_dir(UID, qos).rsplit("/", 1)[1]
            assert layout.parse_pod_dir_name(name) == UID
    assert SYSD.parse_container_dir_name(f"cri-containerd-{CID}.scope") == ("containerd", CID)
    assert SYSD.parse_container_dir_name(f"crio-{CID}.scope") == ("cri-o", CID)
    assert CGFS.parse_container_dir_name(CID) == ("", CID)


@pytest.mark.parametrize(
    "name",
    [
        "burstable",
        "besteffort",
        "pod..",
        f"pod{UID}x",
        f"pod{UID[:-1]}/",
        f"kubepods-pod{UID}.slice",  # systemd names never carry '-' in the UID
        f"kubepods-weird-pod{UID_}.slice",
        f"crio-conmon-{CID}.scope",
        f"crio-{CID}.scope.d",
        "x" * 300,
        "",
        # ``$`` also matches before a trailing newline: these once parsed as the pod/container itself.
        f"pod{UID}\n",
        f"kubepods-besteffort-pod{UID_}.slice\n",
        f"{CID}\n",
        f"cri-containerd-{CID}.scope\n",
    ],
)
def test_reverse_parsing_refuses_malformed(name: str) -> None:
    for layout in (CGFS, SYSD):
        assert layout.parse_pod_dir_name(name) is None
        assert layout.parse_container_dir_name(name) is None


@pytest.mark.parametrize("raw", [f"{UID}\n", f"{UID}\n\n", f"\n{UID}"])
def test_a_uid_with_a_newline_is_refused(raw: str) -> None:
    with pytest.raises(UnsafePath):
        check_pod_uid(raw)
    with pytest.raises(UnsafePath):
        CGFS.pod_dir(raw, BE)
    with pytest.raises(UnsafePath):
        parse_container_id(f"containerd://{CID}\n")


def test_detect_driver_from_tree(fake_host: FakeHost) -> None:
    assert detect_driver(fake_host.paths, CgroupMode.V1) is CgroupDriver.SYSTEMD  # nothing: default
    fake_host.with_paths(cgroup_driver="cgroupfs")
    assert detect_driver(fake_host.paths, CgroupMode.V1) is CgroupDriver.CGROUPFS  # configured
    fake_host.mkcgroup("cpu", "kubepods.slice")
    assert detect_driver(fake_host.paths, CgroupMode.V1) is CgroupDriver.SYSTEMD  # the tree wins
    fake_host.with_paths(cgroup_driver="bogus")
    assert detect_driver(fake_host.paths, CgroupMode.V1) is CgroupDriver.SYSTEMD


def test_detect_driver_cgroupfs_under_parent_and_bad_config(fake_host: FakeHost) -> None:
    fake_host.with_paths(cgroup_parent="/test-parent")
    fake_host.mkcgroup("cpu", "test-parent/kubepods")
    assert detect_driver(fake_host.paths, CgroupMode.V1) is CgroupDriver.CGROUPFS
    fake_host.with_paths(cgroup_parent="/other", cgroup_driver="bogus")
    with pytest.raises(ConfigError):
        detect_driver(fake_host.paths, CgroupMode.V1)


def test_detect_driver_v2(fake_host: FakeHost) -> None:
    fake_host.use_cgroup_v2()
    fake_host.mkcgroup(None, "kubepods")
    assert detect_driver(fake_host.paths, CgroupMode.V2) is CgroupDriver.CGROUPFS


def test_sentinel_outside_root_is_never_touched(fake_host: FakeHost, tmp_path: Path) -> None:
    # A sentinel next to the cgroup root, reachable by '..' from a pod dir, and a planted symlink.
    sentinel = tmp_path / "sentinel"
    sentinel.write_text("untouched")
    os.chmod(sentinel, 0o600)
    before = os.stat(sentinel)
    fake_host.pod_cgroup(UID, BE)
    os.symlink(tmp_path, fake_host.paths.cgroup_root / "cpu" / "kubepods" / "besteffort" / "escape")
    os.symlink(sentinel, fake_host.paths.cgroup_root / "cpu" / "kubepods" / "cpu.shares")
    host = Host(fake_host.paths, CgroupMode.V1, CgroupDriver.CGROUPFS)
    attempts = 0
    for uid in BAD_UIDS:
        with pytest.raises(UnsafePath):
            host.read("cpu.shares", host.layout.pod_dir(uid, BE))
        attempts += 1
    for cid in BAD_CONTAINER_IDS:
        with pytest.raises(UnsafePath):
            host.read("cpu.shares", host.layout.container_dir(UID, BE, cid))
        attempts += 1
    for raw_dir in [
        "../../sentinel",
        "kubepods/besteffort/escape",
        "kubepods/besteffort/escape/x",
        "kubepods",
    ]:
        with pytest.raises(UnsafePath):
            host.read("cpu.shares", raw_dir)
        attempts += 1
    assert host.list_cgroups("kubepods/besteffort", 3) == [
        "kubepods/besteffort",
        f"kubepods/besteffort/pod{UID}",
    ]
    after = os.stat(sentinel)
    assert attempts == len(BAD_UIDS) + len(BAD_CONTAINER_IDS) + 4
    assert sentinel.read_text() == "untouched"
    assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)
