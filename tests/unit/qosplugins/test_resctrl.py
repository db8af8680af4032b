"""RdtResctrl on a fake resctrl tree through the agent's executor: groups made (and resctrl mounted),
schemata from the classes' percents (Intel and AMD), threads moved, one log line where the CPU lacks
CAT/MBA, groups removed or reset at stop."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from koordlet import api
from koordlet.system import resctrl
from koordlet.system.paths import HostPaths
from koordlet.testing import make_pod
from qosplugins.resctrl import RdtResctrl
from tests.support.fakehost import FakeHost
from tests.unit.qosplugins.nodeqos import NodeQoSEnv

SLO = {
    "resourceQOSStrategy": {
        "lsClass": {"resctrlQOS": {"enable": True}},
        "beClass": {
            "resctrlQOS": {
                "enable": True,
                "catRangeStartPercent": 0,
                "catRangeEndPercent": 30,
                "mbaPercent": 35,
            }
        },
    }
}


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """resctrl's directory semantics a tmp dir lacks: mkdir makes a group's files, rmdir takes them."""
    make, remove = resctrl.make_group, resctrl.remove_group

    def make_group(paths: HostPaths, group: str) -> bool:
        made = make(paths, group)
        if made:
            d = resctrl.group_dir(paths, group)
            (d / "schemata").write_text((paths.resctrl_root / "schemata").read_text())
            (d / "tasks").write_text("")
        return made

    def remove_group(paths: HostPaths, group: str) -> bool:
        d = resctrl.group_dir(paths, group)
        for f in ("schemata", "tasks"):
            (d / f).unlink(missing_ok=True)
        return remove(paths, group)

    monkeypatch.setattr(resctrl, "make_group", make_group)
    monkeypatch.setattr(resctrl, "remove_group", remove_group)


def schemata(fake: FakeHost, group: str) -> str:
    return (fake.paths.resctrl_root / group / "schemata").read_text()


def moved(env: NodeQoSEnv, group: str) -> set[int]:
    return {
        int(t)
        for e in env.executor.events()
        if e["resource"] == "tasks" and str(e["path"]).endswith(f"/{group}/tasks")
        for t in str(e["after"]).split(",")
    }


def test_groups_schemata_and_threads(fake_host: FakeHost, kernel: None) -> None:
    fake_host.make_resctrl(cbm_mask=0x7FF, cache_ids=(0, 1))
    env = NodeQoSEnv(fake_host)
    be = env.add_pod(make_pod("be", api.QOSClass.BE, containers=2))
    ls = env.add_pod(make_pod("ls", api.QOSClass.LS))
    lsr = env.add_pod(make_pod("lsr", api.QOSClass.LSR))  # LSR class disabled: threads stay
    own = env.add_pod(make_pod("own", api.QOSClass.BE, annotations={"node.koordinator.sh/resctrl": "{}"}))
    sandbox = f"{be.cgroup_dir}/{'e' * 64}"
    fake_host.mkcgroup(None, sandbox)
    for d, tids in [
        (be.containers[0].cgroup_dir, "101\n102\n"),
        (be.containers[1].cgroup_dir, "103\n"),
        (sandbox, "100\n"),
        (ls.containers[0].cgroup_dir, "201\n"),
        (lsr.containers[0].cgroup_dir, "301\n"),
        (own.containers[0].cgroup_dir, "401\n"),
    ]:
        fake_host.write_cgroup("tasks", d, tids)
    env.slo(SLO)
    plugin = env.start(RdtResctrl())
    env.tick()
    # 11 ways, BE 0-30 %: ways [ceil(0), ceil(3.3)) = 0..3 -> 0xf; MBA 35 % rounds up to 40 on Intel
    assert schemata(fake_host, "BE") == "L3:0=f;1=f\nMB:0=40;1=40\n"
    assert schemata(fake_host, "LS") == "L3:0=7ff;1=7ff\nMB:0=100;1=100\n"
    assert schemata(fake_host, "LSR") == "L3:0=7ff;1=7ff\nMB:0=100;1=100\n"  # the file the kernel made
    assert moved(env, "BE") == {100, 101, 102, 103}
    assert moved(env, "LS") == {201}
    assert moved(env, "LSR") == set()
    # a NodeSLO change moves BE's share live
    env.slo({"resourceQOSStrategy": {"beClass": {"resctrlQOS": {"enable": True, "catRangeEndPercent": 50}}}})
    env.tick()
    assert schemata(fake_host, "BE") == "L3:0=3f;1=3f\nMB:0=100;1=100\n"  # ceil(5.5) = 6 ways
    plugin.shutdown()
    assert not any((fake_host.paths.resctrl_root / g).exists() for g in ("LSR", "LS", "BE"))


def test_mounts_resctrl_amd_units_and_keeps_groups_it_found(fake_host: FakeHost, kernel: None) -> None:
    fake_host.write("proc/cpuinfo", "vendor_id\t: AuthenticAMD\nflags\t\t: cat_l3 mba\n")
    fake_host.paths.resctrl_root.mkdir(parents=True)
    env = NodeQoSEnv(fake_host)
    mounts: list[Path] = []

    def mount(paths: HostPaths) -> None:
        mounts.append(paths.resctrl_root)
        fake_host.make_resctrl(cbm_mask=0xFFFF, cache_ids=(0,), vendor="AuthenticAMD")
        (paths.resctrl_root / "LS").mkdir()
        (paths.resctrl_root / "LS" / "schemata").write_text("L3:0=ff\nMB:0=2048\n")

    env.executor.resctrl.mounter = mount
    env.slo(
        {
            "resourceQOSStrategy": {
                "lsClass": {"resctrlQOS": {"enable": True, "catRangeStartPercent": 50, "mbaPercent": 50}}
            }
        }
    )
    plugin = env.start(RdtResctrl())
    env.tick()
    assert mounts == [fake_host.paths.resctrl_root]
    # 16 ways, 50-100 %: ways 8..16 -> 0xff00; AMD 50 %: int(25 * 8 * 0.8 * 50 / 100) = 80
    assert schemata(fake_host, "LS") == "L3:0=ff00\nMB:0=80\n"
    plugin.shutdown()
    assert schemata(fake_host, "LS") == "L3:0=ffff\nMB:0=2048\n"  # there before: reset to everything
    assert not (fake_host.paths.resctrl_root / "BE").exists()  # made by the plugin: removed


def test_cpu_without_cat_or_mba_is_one_log_line(
    fake_host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    fake_host.write("proc/cpuinfo", "vendor_id\t: GenuineIntel\nflags\t\t: fpu sse\n")
    env = NodeQoSEnv(fake_host)
    env.slo(SLO)
    with caplog.at_level(logging.INFO):
        plugin = env.start(RdtResctrl())
        for _ in range(3):
            env.tick()
            env.clock.advance(61)
        plugin.shutdown()
    assert caplog.text.count("resctrl QoS skipped: the CPU lacks cat_l3, mba") == 1
    assert env.executor.events() == []
    assert not fake_host.paths.resctrl_root.exists()
    # what the CPU lacks holds until a reboot: no tick is scheduled to find that out again every second
    assert env.scheduled == []


def test_a_group_removed_behind_its_back_is_made_again(fake_host: FakeHost, kernel: None) -> None:
    fake_host.make_resctrl()
    env = NodeQoSEnv(fake_host)
    env.slo(SLO)
    env.start(RdtResctrl())
    env.tick()
    shutil.rmtree(fake_host.paths.resctrl_root / "BE")
    env.clock.advance(61)  # the executor re-checks what it owns once a force period
    env.tick()  # the schemata write finds the group gone
    env.tick()
    assert schemata(fake_host, "BE") == "L3:0=f\nMB:0=40\n"
