"""Real kernel (cgroup v1): the agent's runtime hooks on pods appearing in a real kubepods tree.

The agent runs standalone as a process over a test kubepods parent with a pod list (what the kubelet's
``/pods`` would say: labels, annotations, batch resources); pods are listed before their cgroups are made,
as the kubelet does. Checked: a BE pod's batch-cpu 1500 / limit 3000 and batch-memory 1Gi become
``cpu.shares`` 1536, ``cpu.cfs_quota_us`` 300000 and ``memory.limit_in_bytes`` 1 GiB on the pod and its
container; an LSR pod's container gets its ``resource-status`` cpuset and quota -1 (pod too); an LS pod's
container the share pool (the CPUs no pod is bound to); ``oom_score_adj`` reaches the container's process;
values changed by hand are restored; pods that are not ours (not listed with batch resources, or in
another node's tree) are never touched. The periodic pass is set far out (60 s) so everything here is the
event path's work: each pod's values must be in place within a bound derived from the pass's own cost.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from koordlet.api import KubeQOSClass
from koordlet.system import coresched
from koordlet.testing import wait_until
from koordlet.testing.agent import Agent
from koordlet.testing.cgroups import RealContainer, RealKubepods, RealPod, unavailable, write_file
from koordshared.apis.meta.cpulist import format_cpuset, parse_cpuset

pytestmark = pytest.mark.root
GiB = 1 << 30
BVT = Path("/sys/fs/cgroup/cpu/cpu.bvt_warp_ns")
SETTLE = 5.0
"""Seconds a value may take to appear after its cgroup does: the PLEG wakes at once and a pass takes
milliseconds; this bound only absorbs a busy machine (the test reports what it measured)."""


@pytest.fixture
def tree() -> Iterator[RealKubepods]:
    why = unavailable("the runtime hooks test")
    if why:
        pytest.skip(why)
    kp = RealKubepods(prefix="koordlet-hooks")
    try:
        yield kp
    finally:
        kp.cleanup()


def pod_item(uid: str, name: str, qos: str, labels: Mapping[str, str], **kw: Any) -> dict[str, Any]:
    resources = kw.get("resources") or {}
    return {
        "metadata": {
            "uid": uid,
            "name": name,
            "namespace": "default",
            "labels": dict(labels),
            "annotations": dict(kw.get("annotations") or {}),
        },
        "spec": {
            "nodeName": "e2e-node",
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        },
        "status": {"phase": "Running", "qosClass": qos},
    }


def read(kp: RealKubepods, sub: str, cgroup_dir: str, name: str) -> str:
    return kp.path(sub, cgroup_dir, name).read_text().strip()


def reads(kp: RealKubepods, sub: str, cgroup_dir: str, name: str, value: str) -> Callable[[], bool]:
    """A probe: the file holds ``value``."""
    return lambda: read(kp, sub, cgroup_dir, name) == value


def values(kp: RealKubepods, cgroup_dir: str) -> tuple[str, str, str]:
    return (
        read(kp, "cpu", cgroup_dir, "cpu.shares"),
        read(kp, "cpu", cgroup_dir, "cpu.cfs_quota_us"),
        read(kp, "memory", cgroup_dir, "memory.limit_in_bytes"),
    )


def made(kp: RealKubepods, qos: KubeQOSClass, uid: str) -> tuple[RealPod, RealContainer, float]:
    """The pod's and its container's cgroups, as the kubelet and the runtime make them; returns when the
    last dir was made."""
    pod = kp.add_pod(qos, uid)
    c = kp.add_container(pod)
    return pod, c, time.monotonic()


def test_runtime_hooks_on_real_cgroups(tmp_path: Path, tree: RealKubepods) -> None:
    kp = tree
    kp.tree.mkdir("kubepods/burstable")  # tiers exist before pods, as under a kubelet
    be_uid, lsr_uid, ls_uid, stray_uid = (str(uuid.uuid4()) for _ in range(4))
    batch = {
        "requests": {"kubernetes.io/batch-cpu": "1500", "kubernetes.io/batch-memory": "1Gi"},
        "limits": {"kubernetes.io/batch-cpu": "3000", "kubernetes.io/batch-memory": "1Gi"},
    }
    cpus = list(range(os.cpu_count() or 1))
    bound = str(cpus[-1])
    items = [
        pod_item(
            be_uid,
            "batch",
            "BestEffort",
            {"koordinator.sh/qosClass": "BE"},
            resources=batch,
            annotations={"koordinator.sh/oom-score-adj": "500"},
        ),
        pod_item(
            lsr_uid,
            "lsr",
            "Guaranteed",
            {"koordinator.sh/qosClass": "LSR"},
            annotations={"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": bound})},
        ),
        pod_item(ls_uid, "ls", "Burstable", {"koordinator.sh/qosClass": "LS"}),
    ]
    pod_list = tmp_path / "pods.json"
    pod_list.write_text(json.dumps({"kind": "PodList", "items": items}))
    # Another node's tree on the same machine, holding a pod with our BE pod's own batch resources listed
    # under our UID: not ours, never touched.
    other = RealKubepods(prefix="koordlet-other")
    agent = Agent(
        tmp_path,
        f"--cgroup-root=/{kp.parent}",
        f"--pod-list={pod_list}",
        "--feature-gates=OOMScoreAdj=true,CoreSched=true",
        "--runtime-hooks-reconcile-interval=60s",
        "--kubelet-sync-interval=60s",
    )
    try:
        agent.wait_ready()
        foreign, foreign_c, _ = made(other, KubeQOSClass.BESTEFFORT, be_uid)
        before_foreign = values(other, foreign.cgroup_dir), values(other, foreign_c.cgroup_dir)
        latencies: dict[str, float] = {}

        # BE: batch resources become the pod's and the container's limits
        be, be_c, t0 = made(kp, KubeQOSClass.BESTEFFORT, be_uid)
        want = ("1536", "300000", str(GiB))
        got = wait_until(
            lambda: values(kp, be.cgroup_dir) == want == values(kp, be_c.cgroup_dir), 30, step=0.005
        )
        assert got, (values(kp, be.cgroup_dir), values(kp, be_c.cgroup_dir), agent.tail())
        latencies["be"] = time.monotonic() - t0

        # LSR: the scheduler's cpuset, no quota (the kubelet gave it one)
        lsr = kp.add_pod(KubeQOSClass.GUARANTEED, lsr_uid)
        write_file(kp.path("cpu", lsr.cgroup_dir, "cpu.cfs_quota_us"), "200000")
        lsr_c = kp.add_container(lsr)
        t0 = time.monotonic()
        write_file(kp.path("cpu", lsr_c.cgroup_dir, "cpu.cfs_quota_us"), "200000")

        def lsr_done() -> bool:
            return (
                read(kp, "cpuset", lsr_c.cgroup_dir, "cpuset.cpus") == bound
                and read(kp, "cpu", lsr_c.cgroup_dir, "cpu.cfs_quota_us") == "-1"
                and read(kp, "cpu", lsr.cgroup_dir, "cpu.cfs_quota_us") == "-1"
            )

        assert wait_until(lsr_done, 30, step=0.005), agent.tail()
        latencies["lsr"] = time.monotonic() - t0

        # LS: the share pool, every CPU but the bound one
        _, ls_c, t0 = made(kp, KubeQOSClass.BURSTABLE, ls_uid)
        pool = format_cpuset(set(cpus) - {int(bound)})
        assert wait_until(lambda: read(kp, "cpuset", ls_c.cgroup_dir, "cpuset.cpus") == pool, 30, step=0.005)
        latencies["ls"] = time.monotonic() - t0
        assert all(v <= SETTLE for v in latencies.values()), (latencies, agent.tail())

        # oom_score_adj reaches a process started in the container (the next pass covers it)
        proc = kp.busy(be_c, 0.05)
        write_file(kp.path("cpu", be_c.cgroup_dir, "cpu.shares"), "2")  # a change by hand, also a wake-up
        oom = Path(f"/proc/{proc.pid}/oom_score_adj")
        assert wait_until(lambda: oom.read_text().strip() == "500", 30, step=0.01), agent.tail()

        # values changed by hand are restored, long before the periodic pass (60 s)
        for sub, d, name, wrong, right in (
            ("cpu", be_c.cgroup_dir, "cpu.shares", "2", "1536"),
            ("cpu", be.cgroup_dir, "cpu.cfs_quota_us", "-1", "300000"),
            ("memory", be_c.cgroup_dir, "memory.limit_in_bytes", str(2 * GiB), str(GiB)),
            ("cpuset", ls_c.cgroup_dir, "cpuset.cpus", ",".join(map(str, cpus)), pool),
        ):
            write_file(kp.path(sub, d, name), wrong)
            t0 = time.monotonic()
            restored = wait_until(reads(kp, sub, d, name, right), 30, step=0.005)
            assert restored, (name, read(kp, sub, d, name), agent.tail())
            latencies[f"restore {name}"] = time.monotonic() - t0

        # not ours: a pod not listed with batch resources keeps the kubelet's values; the other tree too
        stray, stray_c, _ = made(kp, KubeQOSClass.BESTEFFORT, stray_uid)
        before = values(kp, stray.cgroup_dir), values(kp, stray_c.cgroup_dir)
        write_file(kp.path("cpu", be_c.cgroup_dir, "cpu.shares"), "3")  # a wake-up to be sure a pass ran
        assert wait_until(lambda: read(kp, "cpu", be_c.cgroup_dir, "cpu.shares") == "1536", 30)
        assert (values(kp, stray.cgroup_dir), values(kp, stray_c.cgroup_dir)) == before
        assert (values(other, foreign.cgroup_dir), values(other, foreign_c.cgroup_dir)) == before_foreign

        # standalone, the node's topology is served as the NodeResourceTopology the cluster would get
        nrt = agent.get("/noderesourcetopology")
        assert nrt["kind"] == "NodeResourceTopology" and nrt["metadata"]["name"] == "e2e-node"
        pools = json.loads(nrt["metadata"]["annotations"]["node.koordinator.sh/cpu-shared-pools"])
        assert format_cpuset(c for p in pools for c in parse_cpuset(p.get("cpuset", ""))) == pool

        # GroupIdentity and CoreSched, where this kernel lacks them, are refused once, clearly
        log = agent.tail(200_000)
        lacking = [
            h
            for h, has in (("GroupIdentity", BVT.exists()), ("CoreSched", coresched.probe() is None))
            if not has
        ]
        for hook in lacking:
            lines = [line for line in log.splitlines() if f"runtime hook {hook}:" in line]
            assert len(lines) == 1 and "stays idle" in lines[0], (hook, lines)
        print("runtime hooks latencies (s):", {k: round(v, 4) for k, v in latencies.items()})
    finally:
        assert agent.stop() == 0, agent.tail()
        other.cleanup()
