"""Block devices as major:minor (through a sysfs tree) and the per-device line formats of v1 and v2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordlet.api.errors import ResourceUnsupported
from koordlet.system import blkio
from koordlet.system.blkio import DeviceNumber
from koordlet.system.cgroups import CgroupMode, from_kernel, to_kernel, validate
from koordlet.system.host import Host
from koordlet.system.paths import HostPaths
from koordshared.runtime.errors import InvalidValue
from tests.support.fakehost import make_block_device

V1, V2 = CgroupMode.V1, CgroupMode.V2


@pytest.fixture
def sysfs(tmp_path: Path) -> HostPaths:
    sys = tmp_path / "sys"
    vdb = make_block_device(sys, "vdb", "252:16")
    make_block_device(sys, "vdb1", "252:17", parent=vdb)
    make_block_device(sys, "dm-0", "253:0", dm_name="vg0-data")
    return HostPaths(sys_root=sys)


def test_device_number_parse_and_format() -> None:
    assert DeviceNumber.parse(" 8:16\n") == DeviceNumber(8, 16)
    assert str(DeviceNumber(259, 3)) == "259:3"
    for bad in ("8", "8:", ":1", "a:b", "8:1 2"):
        with pytest.raises(InvalidValue):
            DeviceNumber.parse(bad)


def test_names_resolve_through_sysfs_and_partitions_give_theirmake_block_device(sysfs: HostPaths) -> None:
    assert blkio.resolve_device_name(sysfs, "vdb") == DeviceNumber(252, 16)
    assert blkio.resolve_device_name(sysfs, "/dev/vdb") == DeviceNumber(252, 16)
    assert blkio.resolve_device_name(sysfs, "/dev/vdb1") == DeviceNumber(252, 16)
    assert blkio.resolve_device_name(sysfs, "/dev/mapper/vg0-data") == DeviceNumber(253, 0)
    assert blkio.resolve_device_name(sysfs, "dm-0") == DeviceNumber(253, 0)
    for missing in ("sdz", "/dev/", ".."):
        with pytest.raises(ResourceUnsupported):
            blkio.resolve_device_name(sysfs, missing)


def test_a_partition_number_resolves_to_its_disk(sysfs: HostPaths) -> None:
    assert blkio.whole_disk(sysfs, DeviceNumber(252, 17)) == DeviceNumber(252, 16)
    with pytest.raises(ResourceUnsupported, match="not a block device"):
        blkio.whole_disk(sysfs, DeviceNumber(0, 42))  # an anonymous device (tmpfs, overlay)


def test_v1_lines_parse_render_and_zero_removes() -> None:
    text = "8:0 1048576\n8:16 200\n"
    assert blkio.parse_device_values(text) == {DeviceNumber(8, 0): 1048576, DeviceNumber(8, 16): 200}
    assert blkio.parse_device_values("default 100\n8:0 300\n") == {DeviceNumber(8, 0): 300}
    with pytest.raises(InvalidValue):
        blkio.parse_device_values("8:0 lots\n")
    # a device without a line holds 0: writing 0 for it is no change, anything else is
    assert blkio.same_device_value("blkio.throttle.read_bps_device", text, "8:32 0")
    assert blkio.same_device_value("blkio.throttle.read_bps_device", text, "8:16 200")
    assert not blkio.same_device_value("blkio.throttle.read_bps_device", text, "8:16 201")
    assert not blkio.same_device_value("blkio.throttle.read_bps_device", text, "8:0 0")


def test_io_max_parse_and_render() -> None:
    text = "8:0 rbps=1048576 wbps=max riops=max wiops=120\n8:16 rbps=max wbps=max riops=max wiops=max\n"
    parsed = blkio.parse_io_max(text)
    assert parsed[DeviceNumber(8, 0)] == {"rbps": 1048576, "wbps": None, "riops": None, "wiops": 120}
    assert parsed[DeviceNumber(8, 16)] == dict.fromkeys(blkio.IO_MAX_KEYS)
    assert blkio.render_io_max(DeviceNumber(8, 0), "rbps", 0) == "8:0 rbps=max"
    assert blkio.render_io_max(DeviceNumber(8, 0), "wiops", 7) == "8:0 wiops=7"
    with pytest.raises(InvalidValue):
        blkio.render_io_max(DeviceNumber(8, 0), "bps", 7)
    with pytest.raises(InvalidValue):
        blkio.parse_io_max("8:0 rbps=lots\n")


def test_io_weight_parse_and_render() -> None:
    assert blkio.parse_io_weight("default 100\n8:0 50\n") == (100, {DeviceNumber(8, 0): 50})
    assert blkio.render_io_weight(DeviceNumber(8, 0), 0) == "8:0 default"
    assert blkio.render_io_weight(DeviceNumber(8, 0), 10000) == "8:0 10000"
    with pytest.raises(InvalidValue):
        blkio.render_io_weight(DeviceNumber(8, 0), 10001)


def test_v1_resources_translate_to_v2_files() -> None:
    assert to_kernel("blkio.throttle.read_bps_device", V2, "8:0 1048576") == ("io.max", "8:0 rbps=1048576")
    assert to_kernel("blkio.throttle.write_iops_device", V2, "8:0 0") == ("io.max", "8:0 wiops=max")
    assert to_kernel("blkio.cost.weight", V2, "8:0 40") == ("io.weight", "8:0 40")
    assert to_kernel("blkio.cost.weight", V2, "8:0 0") == ("io.weight", "8:0 default")
    assert to_kernel("blkio.cost.qos", V2, "8:0 enable=1 ctrl=user rpct=95 rlat=3000") == (
        "io.cost.qos",
        "8:0 enable=1 ctrl=user rpct=95 rlat=3000",
    )
    assert to_kernel("blkio.throttle.read_bps_device", V1, "8:0 0") == (
        "blkio.throttle.read_bps_device",
        "8:0 0",
    )
    io_max = "8:0 rbps=100 wbps=max riops=max wiops=max\n8:16 rbps=max wbps=5 riops=max wiops=max\n"
    assert from_kernel("blkio.throttle.read_bps_device", V2, io_max) == "8:0 100"
    assert from_kernel("blkio.throttle.write_bps_device", V2, io_max) == "8:16 5"
    assert from_kernel("blkio.throttle.read_iops_device", V2, io_max) == ""
    assert from_kernel("blkio.cost.weight", V2, "default 100\n8:0 40\n") == "8:0 40"
    assert from_kernel("blkio.bfq.weight", V2, "default 200\n8:0 40\n") == "200"
    assert from_kernel("blkio.bfq.weight", V1, "200\n") == "200"
    assert to_kernel("blkio.bfq.weight", V2, "300") == ("io.bfq.weight", "300")


def test_validation_of_device_values() -> None:
    assert validate("blkio.throttle.read_bps_device", "8:0   0") == "8:0 0"
    assert validate("blkio.cost.weight", "8:0 100") == "8:0 100"
    assert validate("blkio.cost.weight", "8:0 0") == "8:0 0"
    for resource, bad in (
        ("blkio.cost.weight", "8:0 101"),
        ("blkio.throttle.read_bps_device", f"8:0 {1 << 63}"),
        ("blkio.cost.qos", "8:0"),
        ("blkio.cost.qos", "8:0 enable=1;rm -rf"),
    ):
        with pytest.raises(InvalidValue):
            validate(resource, bad)


def test_kv_settings_compare_only_the_keys_written() -> None:
    current = "8:0 enable=1 ctrl=user rpct=95.00 rlat=3000 wpct=95.00 wlat=3000 min=1.00 max=10000.00\n"
    assert blkio.same_device_value("blkio.cost.qos", current, "8:0 enable=1 rlat=3000")
    assert not blkio.same_device_value("blkio.cost.qos", current, "8:0 enable=1 rlat=2000")
    assert not blkio.same_device_value("blkio.cost.qos", current, "8:16 enable=1")
    # the kernel shows percents with two decimals: 95 and 95.00 are one value
    assert blkio.same_device_value("blkio.cost.qos", current, "8:0 enable=1 rpct=95 wpct=95.0")
    assert not blkio.same_device_value("blkio.cost.qos", current, "8:0 rpct=90")


@given(
    major=st.integers(0, 4095),
    minor=st.integers(0, 1 << 20),
    value=st.integers(0, (1 << 63) - 1),
    resource=st.sampled_from(sorted(blkio.THROTTLE_KEYS)),
)
def test_v2_round_trip_reads_back_what_v1_semantics_wrote(
    major: int, minor: int, value: int, resource: str
) -> None:
    v1_value = validate(resource, f"{major}:{minor} {value}")
    file_name, text = to_kernel(resource, V2, v1_value)
    assert file_name == "io.max"
    # the kernel shows every key of a device; the others unlimited
    key = blkio.THROTTLE_KEYS[resource]
    shown = " ".join(f"{k}={text.split('=', 1)[1] if k == key else 'max'}" for k in blkio.IO_MAX_KEYS)
    back = from_kernel(resource, V2, f"{major}:{minor} {shown}\n")
    assert blkio.same_device_value(resource, back, v1_value)


def test_current_device_state_reads_the_same_on_v1_and_v2(fake_host: Any) -> None:
    pod = "kubepods/besteffort/pod1"
    fake_host.write_cgroup("blkio.throttle.read_bps_device", pod, "8:0 100\n8:16 200\n")
    v1 = Host(fake_host.paths, mode=V1).read("blkio.throttle.read_bps_device", pod)
    fake_host.use_cgroup_v2()
    fake_host.mkcgroup(None, pod)
    (fake_host.paths.cgroup_root / pod / "io.max").write_text(
        "8:0 rbps=100 wbps=max riops=max wiops=max\n8:16 rbps=200 wbps=max riops=5 wiops=max\n"
    )
    v2 = Host(fake_host.paths, mode=V2).read("blkio.throttle.read_bps_device", pod)
    for text in (v1, v2):
        state = blkio.parse_device_values(text or "")
        assert state == {DeviceNumber(8, 0): 100, DeviceNumber(8, 16): 200}
