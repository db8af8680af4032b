"""The cgroup resource table: mode detection, path building and refusals, validation, v1<->v2 values."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordlet.api.errors import ResourceUnsupported, UnsafePath
from koordlet.system.cgroups import (
    RESOURCES,
    CgroupMode,
    detect_mode,
    from_kernel,
    resource_path,
    shares_to_weight,
    to_kernel,
    validate,
    weight_to_shares,
)
from koordshared.runtime.errors import InvalidValue
from tests.support.fakehost import FakeHost

V1, V2 = CgroupMode.V1, CgroupMode.V2


def test_detect_mode_v1_then_v2(fake_host: FakeHost) -> None:
    assert detect_mode(fake_host.paths) is V1
    fake_host.use_cgroup_v2()
    assert detect_mode(fake_host.paths) is V2


def test_resource_path_v1_and_v2(fake_host: FakeHost) -> None:
    root = fake_host.paths.cgroup_root
    p = fake_host.paths
    assert resource_path(p, V1, "cpu.cfs_quota_us", "kubepods/besteffort/") == (
        root / "cpu/kubepods/besteffort/cpu.cfs_quota_us"
    )
    assert resource_path(p, V1, "cpuacct.usage", "kubepods") == root / "cpuacct/kubepods/cpuacct.usage"
    assert resource_path(p, V1, "memory.stat", "") == root / "memory/memory.stat"
    assert resource_path(p, V2, "cpu.cfs_quota_us", "kubepods") == root / "kubepods/cpu.max"
    assert resource_path(p, V2, "cpuacct.usage", "kubepods") == root / "kubepods/cpu.stat"
    assert resource_path(p, V2, "cpuset.cpus", "a") == root / "a/cpuset.cpus"
    assert resource_path(p, V2, "cpuset.cpus", "a", for_read=True) == root / "a/cpuset.cpus.effective"
    assert resource_path(p, V2, "tasks", "a") == root / "a/cgroup.threads"


def test_every_resource_names_its_v1_file_and_subsystem() -> None:
    for name, res in RESOURCES.items():
        assert res.name == name == res.v1_file
        assert res.subsystem and "/" not in res.subsystem


@pytest.mark.parametrize(
    "bad", ["/etc", "../x", "a/../../b", "a/./b", "a//b", "a\x00b", "..", "kubepods/..", "x" * 5000]
)
def test_resource_path_refuses_escapes(fake_host: FakeHost, bad: str) -> None:
    with pytest.raises(UnsafePath):
        resource_path(fake_host.paths, V1, "cpu.shares", bad)


def test_resource_path_refuses_symlink_escape(fake_host: FakeHost, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    sentinel = outside / "cpu.shares"
    sentinel.write_text("sentinel")
    os.symlink(outside, fake_host.paths.cgroup_root / "cpu" / "evil")
    with pytest.raises(UnsafePath):
        resource_path(fake_host.paths, V1, "cpu.shares", "evil")
    assert sentinel.read_text() == "sentinel"


def test_resource_path_follows_a_linked_subsystem(fake_host: FakeHost) -> None:
    # Many hosts mount cpu,cpuacct together and link cpu -> cpu,cpuacct: that is inside the root.
    root = fake_host.paths.cgroup_root
    (root / "cpu").rmdir()
    (root / "cpu,cpuacct").mkdir()
    os.symlink("cpu,cpuacct", root / "cpu")
    assert resource_path(fake_host.paths, V1, "cpu.shares", "kubepods").name == "cpu.shares"


def test_unknown_or_v1_only_resources(fake_host: FakeHost) -> None:
    with pytest.raises(ResourceUnsupported):
        resource_path(fake_host.paths, V1, "cpu.nonexistent", "")
    with pytest.raises(ResourceUnsupported):
        resource_path(fake_host.paths, V2, "blkio.weight", "")
    assert resource_path(fake_host.paths, V1, "blkio.weight", "").name == "blkio.weight"


@pytest.mark.parametrize(
    ("resource", "value", "expected"),
    [
        ("cpu.cfs_quota_us", "-1", "-1"),
        ("cpu.cfs_quota_us", " 1000\n", "1000"),
        ("cpu.cfs_period_us", "100000", "100000"),
        ("cpu.shares", "2", "2"),
        ("cpu.shares", "262144", "262144"),
        ("cpu.cfs_burst_us", "0", "0"),
        ("cpu.idle", "1", "1"),
        ("cpu.bvt_warp_ns", "-1", "-1"),
        ("memory.limit_in_bytes", "max", "-1"),
        ("memory.high", "-1", "-1"),
        ("memory.min", "0", "0"),
        ("cpuset.cpus", "3,0-2", "0-3"),
        ("blkio.throttle.read_bps_device", "8:0  1048576", "8:0 1048576"),
        ("tasks", "123", "123"),
    ],
)
def test_validate_accepts_and_normalizes(resource: str, value: str, expected: str) -> None:
    assert validate(resource, value) == expected


@pytest.mark.parametrize(
    ("resource", "value"),
    [
        ("cpu.cfs_quota_us", "-2"),  # the kernel would take it as unlimited
        ("cpu.cfs_quota_us", "500"),
        ("cpu.cfs_quota_us", "abc"),
        ("cpu.cfs_quota_us", "1" * 21),
        ("cpu.cfs_quota_us", "max"),
        ("cpu.cfs_period_us", "999"),
        ("cpu.cfs_period_us", "1000001"),
        ("cpu.shares", "1"),
        ("cpu.shares", "262145"),
        ("cpu.cfs_burst_us", "100000001"),
        ("cpu.cfs_burst_us", "-1"),
        ("cpu.idle", "2"),
        ("cpu.bvt_warp_ns", "3"),
        ("memory.limit_in_bytes", "-5"),
        ("cpuset.cpus", "zz"),
        ("cpuset.cpus", ""),
        ("tasks", "0"),
        ("cpu.stat", "1"),
        ("memory.stat", "x"),
        ("cpu.shares", "10\x002"),
        ("cpu.shares", "10\n20"),
        ("blkio.throttle.read_bps_device", "8:0"),
    ],
)
def test_validate_refuses(resource: str, value: str) -> None:
    with pytest.raises(InvalidValue):
        validate(resource, value)


def test_cpuset_must_be_online() -> None:
    assert validate("cpuset.cpus", "0-1", online_cpus=frozenset({0, 1})) == "0-1"
    with pytest.raises(InvalidValue, match="not online"):
        validate("cpuset.cpus", "0-2", online_cpus=frozenset({0, 1}))


def test_to_kernel_v1_is_the_value() -> None:
    assert to_kernel("cpu.cfs_quota_us", V1, "-1") == ("cpu.cfs_quota_us", "-1")
    assert to_kernel("memory.limit_in_bytes", V1, "-1") == ("memory.limit_in_bytes", "-1")
    assert to_kernel("cpu.shares", V1, "1024") == ("cpu.shares", "1024")


def test_to_kernel_v2_cpu_max_keeps_the_other_field() -> None:
    assert to_kernel("cpu.cfs_quota_us", V2, "-1", "50000 200000\n") == ("cpu.max", "max 200000")
    assert to_kernel("cpu.cfs_quota_us", V2, "30000", "max 100000") == ("cpu.max", "30000 100000")
    assert to_kernel("cpu.cfs_quota_us", V2, "30000") == ("cpu.max", "30000 100000")
    assert to_kernel("cpu.cfs_period_us", V2, "50000", "max 100000") == ("cpu.max", "max 50000")
    assert to_kernel("cpu.cfs_period_us", V2, "50000", "20000 100000") == ("cpu.max", "20000 50000")


def test_to_kernel_v2_other_translations() -> None:
    assert to_kernel("cpu.shares", V2, "2") == ("cpu.weight", "1")
    assert to_kernel("cpu.shares", V2, "262144") == ("cpu.weight", "10000")
    assert to_kernel("cpu.shares", V2, "1024") == ("cpu.weight", str(1 + (1024 - 2) * 9999 // 262142))
    assert to_kernel("memory.limit_in_bytes", V2, "-1") == ("memory.max", "max")
    assert to_kernel("memory.high", V2, "4096") == ("memory.high", "4096")
    assert to_kernel("cpu.cfs_burst_us", V2, "5000") == ("cpu.max.burst", "5000")
    assert to_kernel("cpuset.cpus", V2, "1,0") == ("cpuset.cpus", "0-1")
    with pytest.raises(InvalidValue):
        to_kernel("cpu.cfs_quota_us", V2, "-2", "max 100000")
    with pytest.raises(ResourceUnsupported):
        to_kernel("blkio.weight", V2, "100")


def test_from_kernel() -> None:
    assert from_kernel("cpu.cfs_quota_us", V2, "max 100000\n") == "-1"
    assert from_kernel("cpu.cfs_quota_us", V2, "25000 100000\n") == "25000"
    assert from_kernel("cpu.cfs_period_us", V2, "25000 50000\n") == "50000"
    assert from_kernel("cpu.shares", V2, "100\n") == str(weight_to_shares(100))
    assert from_kernel("cpuacct.usage", V2, "usage_usec 1234\nuser_usec 1\nsystem_usec 2\n") == "1234000"
    assert from_kernel("memory.limit_in_bytes", V2, "max\n") == "-1"
    assert from_kernel("memory.limit_in_bytes", V1, "9223372036854771712\n") == "-1"
    assert from_kernel("memory.limit_in_bytes", V1, "1048576\n") == "1048576"
    assert from_kernel("cpu.cfs_quota_us", V1, "-1\n") == "-1"
    raw = "usage_usec 10\nnr_periods 4\nnr_throttled 1\nthrottled_usec 7\n"
    # statistics come back as the kernel wrote them (cgstats parses v1 and v2 keys), no synthetic lines
    assert from_kernel("cpu.stat", V2, raw) == raw.strip()
    with pytest.raises(InvalidValue):
        from_kernel("cpu.cfs_quota_us", V2, "garbage")
    with pytest.raises(InvalidValue):
        from_kernel("cpuacct.usage", V2, "user_usec 1\n")


@given(st.integers(min_value=2, max_value=262144))
def test_shares_weight_roundtrip_is_close_and_monotone(shares: int) -> None:
    w = shares_to_weight(shares)
    assert 1 <= w <= 10000
    # One weight step spans ~26 shares; converting back never moves further than a step.
    assert abs(weight_to_shares(w) - shares) <= 262142 // 9999 + 1
    if shares < 262144:
        assert shares_to_weight(shares + 1) >= w


@given(st.integers(min_value=1, max_value=10000))
def test_weight_shares_weight_is_identity(weight: int) -> None:
    assert shares_to_weight(weight_to_shares(weight)) == weight
