"""resctrl: detection, info, schemata parse/format, L3 masks from percent, MBA rounding, task sets."""

from __future__ import annotations

import pytest

from koordlet.api.errors import UnsafePath
from koordlet.system import resctrl
from koordlet.system.resctrl import Schemata
from koordshared.runtime.errors import InvalidValue
from tests.support.fakehost import FakeHost
from tests.support.paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "resctrl"


def test_detection_and_info(fake_host: FakeHost) -> None:
    assert not resctrl.is_mounted(fake_host.paths)
    assert "lacks cat_l3, mba" in str(resctrl.control_unsupported(fake_host.paths))
    fake_host.make_resctrl(cbm_mask=0xFFFFF, cache_ids=(0, 1), min_cbm_bits=2, bandwidth_gran=10)
    assert resctrl.is_mounted(fake_host.paths)
    assert resctrl.control_unsupported(fake_host.paths) is None
    info = resctrl.read_info(fake_host.paths)
    assert (info.cbm_mask, info.ways, info.min_cbm_bits, info.num_closids) == (0xFFFFF, 20, 2, 16)
    assert (info.bandwidth_gran, info.min_bandwidth) == (10, 10)
    root = resctrl.parse_schemata(fake_host.read("sys/fs/resctrl/schemata"))
    assert sorted(root.l3) == sorted(root.mb) == [0, 1]


def test_supported_needs_both_flags_and_a_resctrl_root(fake_host: FakeHost) -> None:
    fake_host.make_resctrl(flags=("cat_l3",), vendor="AuthenticAMD")
    assert resctrl.read_cpuinfo(fake_host.paths)[0] == "AuthenticAMD"
    assert resctrl.control_unsupported(fake_host.paths) == (
        "the CPU lacks mba (no L3 cache or memory bandwidth allocation)"
    )
    # flags present but no mount and nowhere to mount it: a kernel without resctrl
    fake_host.write("proc/cpuinfo", "vendor_id\t: GenuineIntel\nflags\t\t: cat_l3 mba\n")
    for f in sorted(fake_host.paths.resctrl_root.rglob("*"), reverse=True):
        f.unlink() if f.is_file() else f.rmdir()
    fake_host.paths.resctrl_root.rmdir()
    assert "no resctrl filesystem" in str(resctrl.control_unsupported(fake_host.paths))
    fake_host.paths.resctrl_root.mkdir()  # an empty mount point: mountable
    assert resctrl.control_unsupported(fake_host.paths) is None


def test_info_without_cbm_mask(fake_host: FakeHost) -> None:
    with pytest.raises(InvalidValue):
        resctrl.read_info(fake_host.paths)


def test_groups_and_paths(fake_host: FakeHost) -> None:
    fake_host.make_resctrl()
    for g in resctrl.GROUPS:
        assert resctrl.make_group(fake_host.paths, g)
        d = resctrl.group_dir(fake_host.paths, g)
        assert d.is_dir() and d.parent == fake_host.paths.resctrl_root
    assert not resctrl.make_group(fake_host.paths, "BE")  # there already
    assert resctrl.remove_group(fake_host.paths, "BE")
    assert not resctrl.remove_group(fake_host.paths, "BE")
    with pytest.raises(UnsafePath):
        resctrl.remove_group(fake_host.paths, "")
    assert resctrl.schemata_path(fake_host.paths, "") == fake_host.paths.resctrl_root / "schemata"
    assert resctrl.tasks_path(fake_host.paths, "koordlet-pod-1").name == "tasks"
    for bad in ("../x", "BE/..", "be", "info", "koordlet-", "x" * 100, "LS\x00"):
        with pytest.raises(UnsafePath):
            resctrl.group_dir(fake_host.paths, bad)


def test_schemata_fixture_keeps_unknown_lines() -> None:
    s = resctrl.parse_schemata((FIXTURES / "schemata").read_text())
    assert dict(s.l3) == {0: 0x7FF, 1: 0x7FF}
    assert dict(s.mb) == {0: 100, 1: 100}
    assert s.other == ("L2:0=ff;1=ff",)
    mpam = resctrl.parse_schemata((FIXTURES / "schemata_mpam").read_text())
    assert (dict(mpam.l3), dict(mpam.mb), mpam.other) == ({0: 0xFFFFF}, {0: 70}, ("MPAM:0=3",))


def test_schemata_format_roundtrip() -> None:
    s = Schemata(l3={1: 0xF0, 0: 0xF}, mb={0: 30, 1: 40})
    text = resctrl.format_schemata(s)
    assert text == "L3:0=f;1=f0\nMB:0=30;1=40\n"
    back = resctrl.parse_schemata(text)
    assert (dict(back.l3), dict(back.mb)) == (dict(s.l3), dict(s.mb))
    assert resctrl.format_schemata(Schemata(l3={0: 1})) == "L3:0=1\n"


@pytest.mark.parametrize("bad", ["L3:0=zz\n", "L3:x=1\n", "MB:0=1f\n", "L3:0\n"])
def test_schemata_malformed(bad: str) -> None:
    with pytest.raises(InvalidValue):
        resctrl.parse_schemata(bad)


def _expected_mask(cbm: int, start: int, end: int) -> int:
    ways = cbm.bit_length()
    s = -(-ways * start // 100)
    e = -(-ways * end // 100)
    return sum(1 << i for i in range(s, e))


@pytest.mark.parametrize(("start", "end"), [(0, 30), (0, 100), (30, 100), (10, 50), (90, 100)])
def test_l3_mask_from_percent(start: int, end: int) -> None:
    mask = resctrl.l3_mask_from_percent(0x7FF, start, end)
    assert mask == _expected_mask(0x7FF, start, end)
    assert mask & ~0x7FF == 0
    assert bin(mask).strip("0b").count("0") == 0, "mask must be contiguous"


def test_l3_mask_known_value_and_refusals() -> None:
    assert resctrl.l3_mask_from_percent(0x7FF, 0, 30) == 0xF  # 11 ways: ceil(3.3) = 4 ways
    for cbm, s, e in [(0x7FE, 0, 30), (0x7FF, 30, 30), (0x7FF, -1, 30), (0x7FF, 0, 101), (0, 0, 10)]:
        with pytest.raises(InvalidValue):
            resctrl.l3_mask_from_percent(cbm, s, e)
    with pytest.raises(InvalidValue):
        resctrl.l3_mask_from_percent(0x7FF, 0, 5, min_cbm_bits=2)  # ceil(0.55) = 1 way < 2
    with pytest.raises(InvalidValue):
        resctrl.l3_mask_from_percent(0x7FF, 95, 100)  # ways 11..11: an empty mask
    assert resctrl.l3_mask_from_percent(0x7FF, 0, 10, min_cbm_bits=2) == 0x3


def test_mba_rounding() -> None:
    assert resctrl.mba_intel(35) == 40
    assert resctrl.mba_intel(40) == 40
    assert resctrl.mba_intel(1) == 10
    assert resctrl.mba_intel(99) == 100
    assert resctrl.mba_intel(5, gran=10, min_bw=20) == 20
    assert resctrl.mba_amd(100) == resctrl.AMD_MBA_UNLIMITED
    assert resctrl.mba_amd(50) == int(25 * 8 * 0.8 * 0.5)
    for bad in (0, 101, -5):
        with pytest.raises(InvalidValue):
            resctrl.mba_intel(bad)


def test_tasks_to_append(fake_host: FakeHost) -> None:
    fake_host.make_resctrl()
    fake_host.write("sys/fs/resctrl/BE/tasks", "10\n12\n")
    present = resctrl.parse_tasks(fake_host.read("sys/fs/resctrl/BE/tasks"))
    assert resctrl.tasks_to_append(present, [14, 12, 11, 10, 11, 0]) == [11, 14]
    with pytest.raises(InvalidValue):
        resctrl.parse_tasks("1\nabc\n")


@pytest.mark.parametrize(
    ("vendor", "l3", "mb", "want"),
    [
        # 11 ways: ceil(11*0/100)=0 .. ceil(11*30/100)=4 -> 0xf; Intel MB 35 % rounds up to 40
        ("GenuineIntel", (0, 30), 35, "L3:0=f;1=f\nMB:0=40;1=40\n"),
        # 50-100 %: ways ceil(5.5)=6 .. 11 -> 0x7c0; AMD 100 % is unlimited (2048)
        ("AuthenticAMD", (50, 100), 100, "L3:0=7c0;1=7c0\nMB:0=2048;1=2048\n"),
        # AMD 50 %: int(25*8*0.8*50/100) = 80 units of 1/8 GB/s
        ("AuthenticAMD", None, 50, "MB:0=80;1=80\n"),
        ("GenuineIntel", (0, 100), None, "L3:0=7ff;1=7ff\n"),
    ],
)
def test_plan_schemata_per_vendor(
    fake_host: FakeHost, vendor: str, l3: tuple[int, int] | None, mb: int | None, want: str
) -> None:
    fake_host.make_resctrl(cbm_mask=0x7FF, cache_ids=(0, 1), vendor=vendor)
    assert resctrl.format_schemata(resctrl.plan_schemata(fake_host.paths, l3, mb)) == want


def test_plan_schemata_without_mb_leaves_mb_out(fake_host: FakeHost) -> None:
    fake_host.make_resctrl(cbm_mask=0xFF, cache_ids=(0,), mb=False)
    assert resctrl.format_schemata(resctrl.plan_schemata(fake_host.paths, (0, 50), 50)) == "L3:0=f\n"
    with pytest.raises(InvalidValue):
        resctrl.plan_schemata(fake_host.paths, (40, 41), None)  # less than one way
