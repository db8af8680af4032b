"""BlkIOReconcile on fake v1 and v2 trees (with a fake sysfs of block devices) through the agent's
executor: per-class and per-pod lines, stale devices reset, v2 io.max/io.weight/io.cost, reset at stop."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from koordlet import api
from koordlet.testing import make_pod
from qosplugins.blkio import BlkIOReconcile, device_values, iocost_values
from tests.support.fakehost import FakeHost, make_block_device
from tests.unit.qosplugins.nodeqos import MI, NodeQoSEnv

BE_TIER = "kubepods/besteffort"
RBPS, WBPS = "blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device"
RIOPS, WIOPS = "blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device"
THROTTLES = (RBPS, WBPS, RIOPS, WIOPS)


def disks(fake: FakeHost) -> None:
    vdb = make_block_device(fake.paths.sys_root, "vdb", "252:16")
    make_block_device(fake.paths.sys_root, "vdb1", "252:17", parent=vdb)
    make_block_device(fake.paths.sys_root, "vdc", "252:32")


def be_blocks(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"resourceQOSStrategy": {"beClass": {"blkioQOS": {"enable": True, "blocks": list(blocks)}}}}


@pytest.fixture
def v1(fake_host: FakeHost) -> NodeQoSEnv:
    disks(fake_host)
    env = NodeQoSEnv(fake_host)
    for f in THROTTLES:
        fake_host.enable_feature(f, "")
        env.tier_files(**{f: ""})
    return env


def test_v1_class_and_pod_lines_stale_reset_and_stop(
    v1: NodeQoSEnv, caplog: pytest.LogCaptureFixture
) -> None:
    v1.fake.write_cgroup(RBPS, BE_TIER, "252:32 1000\n")  # left by a NodeSLO of before: stale
    ann = json.dumps({"blocks": [{"name": "/dev/vdb1", "type": "device", "ioCfg": {"writeBPS": 10 * MI}}]})
    pod = v1.add_pod(
        make_pod("be", api.QOSClass.BE, annotations={"koordinator.sh/blkioQOS": ann}),
        **dict.fromkeys(THROTTLES, ""),
    )
    other = v1.add_pod(make_pod("be2", api.QOSClass.BE, containers=2), **dict.fromkeys(THROTTLES, ""))
    v1.slo(
        be_blocks(
            {"name": "vdb", "type": "device", "ioCfg": {"readBPS": 100 * MI, "writeIOPS": 500}},
            {"name": "vg0", "type": "volumegroup", "ioCfg": {"readBPS": 1}},
        )
    )
    plugin = v1.start(BlkIOReconcile())
    with caplog.at_level(logging.WARNING):
        v1.tick()
        v1.tick()
    assert v1.read(RBPS, BE_TIER) == "252:16 104857600"  # the stale 252:32 line is gone (written 0)
    assert v1.read(WIOPS, BE_TIER) == "252:16 500"
    assert v1.read(WBPS, BE_TIER) == ""  # 0: no limit, no line
    # the pod's partition resolves to its disk
    assert v1.read(WBPS, pod.cgroup_dir) == "252:16 10485760"
    # v1 throttles bind only a cgroup's own tasks: the tier's limit is shared out among the three BE
    # containers (104857600 // 3), the pod's among its one container
    c1 = pod.containers[0].cgroup_dir
    assert v1.read(RBPS, c1) == "252:16 34952533" and v1.read(WBPS, c1) == "252:16 10485760"
    assert [v1.read(WIOPS, c.cgroup_dir) for c in other.containers] == ["252:16 166"] * 2  # 500 // 3
    assert v1.read(RBPS, other.cgroup_dir) == ""  # no task there, nothing asked of it
    assert caplog.text.count("type 'volumegroup' skipped") == 1
    # the device leaves the NodeSLO: its lines are reset; stop resets the pod's too
    v1.slo(be_blocks())
    v1.tick()
    assert v1.read(RBPS, BE_TIER) == "" and v1.read(WIOPS, BE_TIER) == ""
    assert v1.read(RBPS, c1) == "" and v1.read(WIOPS, other.containers[1].cgroup_dir) == ""
    assert v1.read(WBPS, c1) == "252:16 10485760"  # the pod's own limit stays
    plugin.shutdown()
    assert v1.read(WBPS, pod.cgroup_dir) == "" and v1.read(WBPS, c1) == ""


def test_unknown_device_and_ls_class_are_warned_not_written(
    v1: NodeQoSEnv, caplog: pytest.LogCaptureFixture
) -> None:
    spec = be_blocks({"name": "nvme9n1", "ioCfg": {"readBPS": 1024}})
    spec["resourceQOSStrategy"]["lsClass"] = {
        "blkioQOS": {"enable": True, "blocks": [{"name": "vdb", "ioCfg": {"readBPS": 1}}]}
    }
    v1.slo(spec)
    v1.start(BlkIOReconcile())
    with caplog.at_level(logging.WARNING):
        v1.tick()
    assert "block 'nvme9n1' skipped" in caplog.text
    assert "lsClass.blkioQOS is not supported" in caplog.text
    assert v1.executor.events() == []


def test_v2_io_max_io_weight_and_root_iocost(fake_host: FakeHost) -> None:
    disks(fake_host)
    env = NodeQoSEnv(fake_host, v2=True)
    fake_host.enable_feature("blkio.throttle.read_bps_device", "")
    fake_host.enable_feature("blkio.cost.weight", "default 100\n")
    env.tier_files(**{"blkio.throttle.read_bps_device": "", "blkio.cost.weight": "default 100\n"})
    for f in ("io.cost.qos", "io.cost.model"):
        (fake_host.paths.cgroup_root / f).write_text("")
    env.slo(
        {
            "resourceQOSStrategy": {
                **be_blocks({"name": "vdb", "ioCfg": {"readBPS": 50 * MI, "ioWeightPercent": 60}})[
                    "resourceQOSStrategy"
                ],
                "cgroupRoot": {
                    "blkioQOS": {"enable": True, "blocks": [{"name": "vdc", "ioCfg": {"readLatency": 2000}}]}
                },
            }
        }
    )
    plugin = env.start(BlkIOReconcile())
    env.tick()
    tier = fake_host.paths.cgroup_root / BE_TIER
    assert (tier / "io.max").read_text() == "252:16 rbps=52428800 wbps=max riops=max wiops=max\n"
    assert (tier / "io.weight").read_text() == "default 100\n252:16 60\n"
    root = fake_host.paths.cgroup_root
    qos = (root / "io.cost.qos").read_text().strip()
    assert qos == "252:32 enable=1 ctrl=user rpct=95 rlat=2000 wpct=95 wlat=3000"
    assert (root / "io.cost.model").read_text().strip() == "252:32 ctrl=auto"
    events = len(env.executor.events())
    env.tick()
    assert len(env.executor.events()) == events  # read back per device and key: nothing to do
    plugin.shutdown()
    assert (tier / "io.max").read_text() == ""
    assert (tier / "io.weight").read_text() == "default 100\n252:16 100\n"
    assert "enable=0" in (root / "io.cost.qos").read_text()


def test_value_mapping_defaults() -> None:
    assert device_values(api.IOCfg()) == {
        "blkio.throttle.read_iops_device": "0",
        "blkio.throttle.read_bps_device": "0",
        "blkio.throttle.write_iops_device": "0",
        "blkio.throttle.write_bps_device": "0",
        "blkio.cost.weight": "100",
    }
    model = iocost_values(api.IOCfg(enable_user_model=True, model_read_bps=7, write_latency_percent=90))
    assert (
        model["blkio.cost.model"] == "ctrl=user rbps=7 rseqiops=0 rrandiops=0 wbps=0 wseqiops=0 wrandiops=0"
    )
    assert model["blkio.cost.qos"] == "enable=1 ctrl=user rpct=95 rlat=3000 wpct=90 wlat=3000"
