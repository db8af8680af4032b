"""CgroupReconcile on fake v1 and v2 trees through the agent's executor: values computed by hand from
koordlet's formulas, the pod annotation's policies, restore when disabled and at stop."""

from __future__ import annotations

import dataclasses
import json

import pytest

from koordlet import api
from koordlet.testing import make_pod
from qosplugins.cgreconcile import CgroupReconcile
from tests.support.fakehost import FakeHost
from tests.unit.qosplugins.nodeqos import GI, MI, NodeQoSEnv

V2_FILES = {"memory.min": "0", "memory.low": "0", "memory.high": "max", "memory.oom.group": "1"}
V1_SOFT = {"memory.soft_limit_in_bytes": "9223372036854771712"}
LS_MEM = {"enable": True, "minLimitPercent": 50, "lowLimitPercent": 80, "throttlingPercent": 80}


def ls_pod(n: int, request: int, limit: int, **kw: object) -> api.PodInfo:
    pod = make_pod(f"ls-{n}", api.QOSClass.LS, uid=f"{n:08x}-0000-4000-8000-{n:012x}", **kw)  # type: ignore[arg-type]
    c = dataclasses.replace(pod.containers[0], memory_request_bytes=request, memory_limit_bytes=limit)
    return dataclasses.replace(pod, containers=(c,))


def be_pod(n: int, batch_request: int, **kw: object) -> api.PodInfo:
    pod = make_pod(f"be-{n}", api.QOSClass.BE, uid=f"{n:08x}-0000-4000-8000-{n:012x}", **kw)  # type: ignore[arg-type]
    c = dataclasses.replace(pod.containers[0], batch_memory_request_bytes=batch_request)
    return dataclasses.replace(pod, containers=(c,))


@pytest.fixture
def v2(fake_host: FakeHost) -> NodeQoSEnv:
    env = NodeQoSEnv(fake_host, v2=True)
    for resource, value in V2_FILES.items():
        fake_host.enable_feature(resource, value)
    env.tier_files(**{k: v for k, v in V2_FILES.items() if k != "memory.high"})
    return env


def test_v2_pod_container_and_tier_values_from_the_formulas(v2: NodeQoSEnv) -> None:
    ls = v2.add_pod(ls_pod(1, 1 * GI, 2 * GI), **V2_FILES)
    # limit unset: memory.high is taken against node allocatable (15 GiB)
    ls2 = v2.add_pod(ls_pod(2, 512 * MI, 0), **V2_FILES)
    be = v2.add_pod(be_pod(3, 256 * MI), **V2_FILES)
    v2.slo(
        {
            "resourceQOSStrategy": {
                "lsClass": {"memoryQOS": LS_MEM},
                "beClass": {"memoryQOS": {"enable": True}},
            }
        }
    )
    plugin = v2.start(CgroupReconcile())
    assert [i for i, _ in v2.scheduled] == [1.0]
    v2.tick()
    c1, c2, cb = ls.containers[0].cgroup_dir, ls2.containers[0].cgroup_dir, be.containers[0].cgroup_dir
    # LS pod 1: min = 1 GiB * 50 % = 536870912; low = 1 GiB * 80 % = 858993459, which the kernel (and
    # the executor before it) rounds down to pages: 858992640
    assert (v2.read("memory.min", ls.cgroup_dir), v2.read("memory.low", ls.cgroup_dir)) == (
        "536870912",
        "858992640",
    )
    assert (v2.read("memory.min", c1), v2.read("memory.low", c1)) == ("536870912", "858992640")
    # high = (1 GiB + (2 GiB - 1 GiB) * 80 // 100) // 4096 * 4096 = 1932734464
    assert v2.read("memory.high", c1) == "1932734464"
    # LS pod 2: 536870912 + (16106127360 - 536870912) * 80 // 100 = 12992276070 -> 12992274432 (pages)
    assert v2.read("memory.high", c2) == "12992274432"
    assert v2.read("memory.min", c2) == "268435456"
    # BE class enabled with the neutral percentages: no protection, no throttling
    assert (v2.read("memory.min", cb), v2.read("memory.low", cb), v2.read("memory.high", cb)) == (
        "0",
        "0",
        "max",
    )
    # tiers: burstable sums its pods, kubepods (Guaranteed, parent of all) sums everything
    assert v2.read("memory.min", "kubepods/burstable") == "805306368"  # 536870912 + 268435456
    assert v2.read("memory.low", "kubepods/burstable") == "1288486912"  # 858993459 + 429496729, in pages
    assert v2.read("memory.min", "kubepods") == "805306368"
    assert v2.read("memory.min", "kubepods/besteffort") == "0"
    # oomKillGroup 0 leaves kubelet's memory.oom.group alone
    assert v2.read("memory.oom.group", c1) == "1"
    # a second pass finds everything in place
    events = len(v2.executor.events())
    v2.tick()
    assert len(v2.executor.events()) == events
    plugin.shutdown()
    for d in (ls.cgroup_dir, c1, c2, cb, "kubepods", "kubepods/burstable"):
        assert (v2.read("memory.min", d), v2.read("memory.low", d)) == ("0", "0"), d
    assert v2.read("memory.high", c1) == "max"


def test_v2_annotation_policies_none_and_auto(v2: NodeQoSEnv) -> None:
    none = v2.add_pod(
        ls_pod(1, 1 * GI, 2 * GI, annotations={"koordinator.sh/memoryQOS": json.dumps({"policy": "none"})}),
        **V2_FILES,
    )
    # auto: Koordinator's recommended LS config (no protection) overlaid with the pod's own field
    auto = v2.add_pod(
        ls_pod(
            2,
            1 * GI,
            2 * GI,
            annotations={"koordinator.sh/memoryQOS": '{"policy":"auto","minLimitPercent":25}'},
        ),
        **V2_FILES,
    )
    v2.slo({"resourceQOSStrategy": {"lsClass": {"memoryQOS": LS_MEM}}})
    v2.start(CgroupReconcile())
    v2.tick()
    assert v2.read("memory.min", none.cgroup_dir) == "0"
    assert v2.read("memory.high", none.containers[0].cgroup_dir) == "max"
    assert v2.read("memory.min", auto.cgroup_dir) == str(GI // 4)
    assert v2.read("memory.low", auto.cgroup_dir) == "0"  # koordlet raises a low below min only if set
    assert v2.read("memory.high", auto.containers[0].cgroup_dir) == "max"


def test_v2_disabling_the_class_puts_the_originals_back(v2: NodeQoSEnv) -> None:
    pod = v2.add_pod(ls_pod(1, 1 * GI, 2 * GI), **{**V2_FILES, "memory.min": "4096"})
    v2.slo({"resourceQOSStrategy": {"lsClass": {"memoryQOS": LS_MEM}}})
    v2.start(CgroupReconcile())
    v2.tick()
    assert v2.read("memory.min", pod.cgroup_dir) == "536870912"
    v2.slo({"resourceQOSStrategy": {"lsClass": {"memoryQOS": {"enable": False}}}})
    v2.tick()
    assert v2.read("memory.min", pod.cgroup_dir) == "4096"  # what was there before, not koordlet's 0
    assert v2.read("memory.high", pod.containers[0].cgroup_dir) == "max"
    assert v2.read("memory.min", "kubepods") == "0"


def test_v1_soft_limit_stands_for_memory_low(fake_host: FakeHost) -> None:
    env = NodeQoSEnv(fake_host)
    fake_host.enable_feature("memory.soft_limit_in_bytes", "9223372036854771712")
    env.tier_files(**V1_SOFT)
    ls = env.add_pod(ls_pod(1, 1 * GI, 2 * GI), **V1_SOFT)
    unprotected = env.add_pod(
        ls_pod(2, 1 * GI, 2 * GI, annotations={"koordinator.sh/memoryQOS": '{"policy":"auto"}'}), **V1_SOFT
    )
    be = env.add_pod(be_pod(3, 256 * MI), **V1_SOFT)
    env.slo(
        {
            "resourceQOSStrategy": {
                "lsClass": {"memoryQOS": LS_MEM},
                "beClass": {"memoryQOS": {"enable": True}},
            }
        }
    )
    plugin = env.start(CgroupReconcile())
    env.tick()
    soft = "memory.soft_limit_in_bytes"
    assert env.read(soft, ls.cgroup_dir) == "858992640"  # low, in pages
    assert env.read(soft, ls.containers[0].cgroup_dir) == "858992640"
    assert env.read(soft, unprotected.cgroup_dir) == "9223372036854771712"  # no protection: no soft limit
    assert env.read(soft, be.cgroup_dir) == "0"  # BE: reclaimed first
    assert env.read(soft, "kubepods/besteffort") == "9223372036854771712"  # tiers are left alone
    plugin.shutdown()
    assert env.read(soft, ls.cgroup_dir) == "-1"  # unlimited again (the kernel reads it back as above)
    assert env.read(soft, be.containers[0].cgroup_dir) == "-1"


def test_v1_without_any_memory_qos_file_writes_nothing(fake_host: FakeHost) -> None:
    env = NodeQoSEnv(fake_host)
    env.add_pod(ls_pod(1, 1 * GI, 2 * GI))
    env.slo({"resourceQOSStrategy": {"lsClass": {"memoryQOS": LS_MEM}}})
    env.start(CgroupReconcile())
    env.tick()
    assert env.executor.events() == []


def test_anolis_knobs_on_v1(fake_host: FakeHost) -> None:
    env = NodeQoSEnv(fake_host)
    knobs = {
        "memory.wmark_ratio": "0",
        "memory.wmark_scale_factor": "50",
        "memory.wmark_min_adj": "0",
        "memory.priority": "0",
        "memory.use_priority_oom": "0",
    }
    for r, v in knobs.items():
        fake_host.enable_feature(r, v)
    env.tier_files(**knobs)
    be = env.add_pod(be_pod(1, 0), **knobs)
    env.slo(
        {
            "resourceQOSStrategy": {
                "beClass": {"memoryQOS": {"enable": True, "priority": 3, "priorityEnable": 1}}
            }
        }
    )
    env.start(CgroupReconcile())
    env.tick()
    c = be.containers[0].cgroup_dir
    # BE defaults after the merge: wmarkRatio 95, wmarkScalePermill 20, wmarkMinAdj 50
    got = {r: env.read(r, c) for r in knobs}
    assert got == {
        "memory.wmark_ratio": "95",
        "memory.wmark_scale_factor": "20",
        "memory.wmark_min_adj": "50",
        "memory.priority": "3",
        "memory.use_priority_oom": "1",
    }
    assert env.read("memory.priority", "kubepods/besteffort") == "3"
    assert env.read("memory.priority", "kubepods/burstable") == "0"  # LS class disabled: untouched
