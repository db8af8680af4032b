"""Node QoS II through the real agent on this machine: CgroupReconcile and SystemConfig write memory QoS
into a kubelet-like tree under a test parent and tunables into /proc/sys from a NodeSLO file, and put
everything back when the agent stops; BlkIOReconcile throttles a loop device for the BE tier, measured
with a real ``dd`` through the cgroup. The tunables are restored by the test as well, whatever happens."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordlet.api import KubeQOSClass
from koordlet.testing import wait_until
from koordlet.testing.agent import Agent
from koordlet.testing.cgroups import KUBEPODS_CONTROLLERS, RealKubepods

pytestmark = [pytest.mark.root, pytest.mark.slow]

MIB = 1 << 20
UNLIMITED = 9223372036854771712  # v1's "no limit", page aligned
VM = Path("/proc/sys/vm")


def write_json(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc))
    return path


def listed_pod(uid: str, name: str, qos: str, resources: dict[str, Any], **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "uid": uid,
            "name": name,
            "namespace": "e2e",
            "labels": {"koordinator.sh/qosClass": qos},
        },
        "spec": {"containers": [{"name": "main", "resources": resources}]},
        "status": {"phase": "Running", **status},
    }


@pytest.fixture
def tunables() -> Iterator[dict[str, str]]:
    """The vm tunables as they are now; written back after the test whatever the agent did."""
    names = ("min_free_kbytes", "watermark_scale_factor")
    before = {n: (VM / n).read_text().strip() for n in names}
    try:
        yield before
    finally:
        for n, v in before.items():
            with contextlib.suppress(OSError):
                (VM / n).write_text(v)


def test_memory_qos_and_system_config_written_then_restored_at_stop(
    tmp_path: Path, kubepods: RealKubepods, tunables: dict[str, str]
) -> None:
    if not kubepods.path("memory", kubepods.kubepods, "memory.soft_limit_in_bytes").exists():
        pytest.skip("needs the v1 memory controller")
    ls = kubepods.add_pod(KubeQOSClass.BURSTABLE)
    ls_c = kubepods.add_container(ls)
    be = kubepods.add_pod(KubeQOSClass.BESTEFFORT)
    be_c = kubepods.add_container(be)
    pods = write_json(
        tmp_path / "pods.json",
        {
            "kind": "PodList",
            "items": [
                listed_pod(
                    ls.uid, "web", "LS", {"requests": {"memory": "256Mi"}, "limits": {"memory": "512Mi"}}
                ),
                listed_pod(
                    be.uid, "batch", "BE", {"requests": {"kubernetes.io/batch-memory": str(64 * MIB)}}
                ),
            ],
        },
    )
    # System config close to what the kernel holds now: one factor step above min_free_kbytes (or the
    # policy floor), watermark_scale_factor one above (or below at the ceiling).
    cap_kib = int(Path("/proc/meminfo").read_text().split()[1])
    factor = max(int(tunables["min_free_kbytes"]), 10240) * 10000 // cap_kib + 1
    want_min_free = cap_kib * factor // 10000
    wsf = int(tunables["watermark_scale_factor"])
    want_wsf = wsf + 1 if wsf < 400 else wsf - 1
    slo = write_json(
        tmp_path / "nodeslo.json",
        {
            "resourceQOSStrategy": {
                "lsClass": {"memoryQOS": {"enable": True, "lowLimitPercent": 50}},
                "beClass": {"memoryQOS": {"enable": True}},
            },
            "systemStrategy": {"minFreeKbytesFactor": factor, "watermarkScaleFactor": want_wsf},
        },
    )
    agent = Agent(
        tmp_path,
        f"--cgroup-root=/{kubepods.parent}",
        f"--pod-list={pods}",
        f"--node-slo-file={slo}",
        "--feature-gates=CgroupReconcile=true,SystemConfig=true",
    )

    def soft(cgroup_dir: str) -> int:
        return int(kubepods.path("memory", cgroup_dir, "memory.soft_limit_in_bytes").read_text())

    try:
        agent.wait_ready()
        # CgroupReconcile and SystemConfig tick on their own; on a busy machine either can come second.
        done = wait_until(
            lambda: (
                soft(ls_c.cgroup_dir) == 128 * MIB
                and soft(be.cgroup_dir) == 0
                and (VM / "min_free_kbytes").read_text().strip() == str(want_min_free)
                and (VM / "watermark_scale_factor").read_text().strip() == str(want_wsf)
            ),
            20,
            step=0.2,
        )
        assert done, agent.tail()
        # LS: memory.low = 256 MiB * 50 % as the v1 soft limit, pod and container; BE reclaimed first
        assert soft(ls.cgroup_dir) == 128 * MIB and soft(be_c.cgroup_dir) == 0
        assert soft(kubepods.kubepods) == UNLIMITED  # tiers are left alone on v1
        assert (VM / "min_free_kbytes").read_text().strip() == str(want_min_free)
        assert (VM / "watermark_scale_factor").read_text().strip() == str(want_wsf)
    finally:
        assert agent.stop() == 0, agent.tail()
    for d in (ls.cgroup_dir, ls_c.cgroup_dir, be.cgroup_dir, be_c.cgroup_dir):
        assert soft(d) == UNLIMITED, d
    assert {n: (VM / n).read_text().strip() for n in tunables} == tunables


@pytest.mark.tool("losetup", "dd")
def test_blkio_throttle_from_the_nodeslo_holds_a_real_dd(tmp_path: Path, loop_device: str) -> None:
    kp = RealKubepods(controllers=(*KUBEPODS_CONTROLLERS, "blkio"))
    try:
        if not kp.path("blkio", kp.kubepods, "blkio.throttle.read_bps_device").exists():
            pytest.skip("needs the v1 blkio controller with throttling")
        be = kp.add_pod(KubeQOSClass.BESTEFFORT)
        c = kp.add_container(be)
        limit = 8 * MIB
        slo = write_json(
            tmp_path / "nodeslo.json",
            {
                "resourceQOSStrategy": {
                    "beClass": {
                        "blkioQOS": {
                            "enable": True,
                            "blocks": [{"name": loop_device, "type": "device", "ioCfg": {"readBPS": limit}}],
                        }
                    }
                }
            },
        )
        agent = Agent(
            tmp_path,
            f"--cgroup-root=/{kp.parent}",
            f"--node-slo-file={slo}",
            "--feature-gates=BlkIOReconcile=true",
        )
        tier = kp.path("blkio", f"{kp.kubepods}/besteffort", "blkio.throttle.read_bps_device")
        try:
            agent.wait_ready()
            assert wait_until(lambda: str(limit) in tier.read_text(), 20, step=0.2), agent.tail()
            # a real read through the cgroup: dd with O_DIRECT from inside the BE container
            mib = 24
            start = time.monotonic()
            dd = kp.tree.spawn(
                c.cgroup_dir[len(kp.parent) + 1 :],
                ["dd", f"if={loop_device}", "of=/dev/null", "bs=1M", f"count={mib}", "iflag=direct"],
            )
            assert dd.wait(60) == 0
            rate = mib * MIB / (time.monotonic() - start)
            print(f"dd through the BE tier: {rate / MIB:.2f} MiB/s (limit {limit / MIB:.0f} MiB/s)")
            assert abs(rate - limit) <= 0.15 * limit, rate
        finally:
            assert agent.stop() == 0, agent.tail()
        assert tier.read_text().strip() == ""  # the limit is gone with the agent
    finally:
        kp.cleanup()
