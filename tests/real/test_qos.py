"""QoS on real containers: an LS spike shrinks the BE tier the kubelet made (BECPUSuppress, cfsQuota policy),
and BE memory pressure evicts the BE pod through the real Eviction API, after which the kubelet kills it,
while the LS pod beside it is left alone."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real.objects import (
    BURN,
    CGROUP_ROOT,
    COLOCATION,
    IDLE,
    apply,
    be_pod,
    container_cgroup,
    delete,
    get,
    ls_deployment,
    pod_cgroup,
    pods,
    slo_config,
    wait_for_room,
    wait_running,
)
from tests.realcluster.cluster import Cluster
from tests.realcluster.control import audit_events
from tests.realcluster.procs import wait_until

BE_TIER = CGROUP_ROOT / "cpu" / "kubepods" / "besteffort"
TWO_BURNERS = f"({BURN}) & ({BURN}) & wait"


def on_node(cluster: Cluster, pod: dict[str, Any]) -> dict[str, Any]:
    """The pod bound to the node at creation: these tests are about the agent, and koord-scheduler's
    LoadAwareScheduling rightly refuses a BE pod while a busy machine keeps the node over its threshold."""
    pod["spec"]["nodeName"] = cluster.node_name
    return pod


def _quota() -> int:
    return int((BE_TIER / "cpu.cfs_quota_us").read_text())


def _period() -> int:
    return int((BE_TIER / "cpu.cfs_period_us").read_text())


def _threshold(cluster: Cluster, **strategy: object) -> dict[str, object]:
    return {"clusterStrategy": {"enable": True, **strategy}}


@pytest.fixture(scope="module")
def qos(cluster: Cluster) -> Iterator[Cluster]:
    # The whole node for LS and BE together: on a busy two-CPU machine the shipped 65 % can leave BE at its
    # minimum before any spike, with nothing left to show a shrink in.
    thresholds = _threshold(cluster, cpuSuppressThresholdPercent=100, cpuSuppressPolicy="cfsQuota")
    with slo_config(cluster, colocation_config=COLOCATION, resource_threshold_config=thresholds):
        yield cluster
        delete(cluster, "deployment", "qos-ls", "qos-spike")
        delete(cluster, "pod", "qos-be", "qos-hog")


def _node_slo_says(cluster: Cluster, **want: object) -> bool:
    spec = get(cluster, "nodeslo", cluster.node_name, ns=None)["spec"].get("resourceUsedThresholdWithBE", {})
    return all(spec.get(k) == v for k, v in want.items())


def test_ls_spike_suppresses_be_on_real_containers(qos: Cluster) -> None:
    # Proves against: the kubelet's kubepods/besteffort tier and the real kernel's CFS accounting of
    # containers containerd started.
    c = qos
    wait_until(
        "the NodeSLO with the cfsQuota policy", lambda: _node_slo_says(c, cpuSuppressPolicy="cfsQuota"), 60
    )
    # A small BE pod (its own limit is BatchResource's business): the tier's quota is what is watched.
    wait_for_room(c, batch_cpu=300)
    apply(c, on_node(c, be_pod("qos-be", TWO_BURNERS, batch_cpu=200, batch_memory="64Mi")))
    wait_running(c, "app=qos-be")
    # Before the spike: BE runs under the quota suppression gives it with LS idle.
    # The budget is what LS and the rest of the machine leave: wait for a moment with room to shrink.
    with contextlib.suppress(TimeoutError):
        wait_until("room in the BE tier's quota", lambda: _quota() >= _period() // 5, 90)
    time.sleep(2)
    before = _quota()
    assert before >= _period() // 5, (
        f"BE already near its minimum ({before}): the machine is too busy to show a shrink"
    )
    # The spike waits a few seconds in its container before burning, so its start is seen from here.
    apply(c, ls_deployment("qos-spike", f"sleep 5; {TWO_BURNERS}", cpu="1"))
    (spike,) = wait_running(c, "app=qos-spike")
    usage = container_cgroup(spike, "cpuacct") / "cpuacct.usage"
    # The spike starts when its container first burns: from there, the time until the BE tier's quota is
    # written under half of what it was.
    last = int(usage.read_text())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(0.005)
        now_ns = int(usage.read_text())
        if now_ns - last > 2_000_000:
            break
        last = now_ns
    began = time.monotonic()
    wait_until(f"the BE quota under half of {before}", lambda: 0 < _quota() <= before // 2, 30, every=0.005)
    took_ms = (time.monotonic() - began) * 1000
    after = _quota()
    print(f"LS spike: BE quota {before} -> {after} (period {_period()}), {took_ms:.0f} ms after it began")
    assert took_ms < 5000
    delete(c, "deployment", "qos-spike")
    wait_until(f"the BE quota back up from {after}", lambda: _quota() > after or _quota() == -1, 60)
    delete(c, "pod", "qos-be")


def _meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, value = line.split(":", 1)
        out[key] = int(value.split()[0]) * 1024
    return out


def _used_percent(seconds: float = 3.0) -> float:
    """The node's memory use as the agent counts it (MemTotal - MemAvailable), the highest over a few
    seconds: a threshold set just above one reading could sit under the next."""
    highest = 0.0
    deadline = time.monotonic() + seconds
    while True:
        info = _meminfo()
        highest = max(highest, (info["MemTotal"] - info["MemAvailable"]) * 100 / info["MemTotal"])
        if time.monotonic() > deadline:
            return highest
        time.sleep(0.1)


def _cgroup_bytes(pod: dict[str, Any]) -> int:
    try:
        return int((pod_cgroup(pod, "memory") / "memory.usage_in_bytes").read_text())
    except (FileNotFoundError, ValueError):
        return 0


def _evictions(cluster: Cluster) -> list[dict[str, Any]]:
    """Every Eviction kube-apiserver's audit log recorded so far."""
    return [
        ev
        for ev in audit_events(cluster.state)
        if ev.get("objectRef", {}).get("subresource") == "eviction" and ev.get("verb") == "create"
    ]


def test_be_memory_pressure_evicts_through_the_eviction_api(qos: Cluster) -> None:
    # Proves against: kube-apiserver's Eviction API (policy/v1) and the kubelet killing the evicted pod;
    # kube-apiserver's audit log says who evicted what.
    c = qos
    apply(c, ls_deployment("qos-ls", IDLE))
    (ls,) = wait_running(c, "app=qos-ls")
    # The kubelet refuses a bound pod its node has no batch room for (OutOfkubernetes.io/batch-cpu), and
    # the manager gives none while LS usage (the spike just before, a busy machine) fills the node.
    wait_for_room(c, batch_cpu=100, batch_memory=2 << 30)
    total = _meminfo()["MemTotal"]
    hog = 1536 << 20
    assert hog * 100 / total > 5, "the node is too big for a 1.5 GiB hog to cross the threshold"
    # Over the threshold only with the hog in: the threshold sits 3 % of the node above today's highest
    # use, the hog adds over 5 %, and eviction stops at today's use plus 1 %.
    threshold = int(_used_percent()) + 3
    lower = threshold - 2
    strategy = _threshold(c, memoryEvictThresholdPercent=threshold, memoryEvictLowerPercent=lower)
    with slo_config(c, colocation_config=COLOCATION, resource_threshold_config=strategy):
        wait_until(
            "the NodeSLO with the threshold",
            lambda: _node_slo_says(c, memoryEvictThresholdPercent=threshold),
            60,
        )
        used = _used_percent()
        assert used < threshold - 1, (
            f"memory use rose to {used:.1f} % of the node, near the {threshold} % set"
        )
        command = "dd if=/dev/zero bs=1536M count=1 2>/dev/null | sleep 100000"
        apply(c, on_node(c, be_pod("qos-hog", command, batch_cpu=100, batch_memory="2Gi")))
        hog_pod = get(c, "pod", "qos-hog")
        uid = hog_pod["metadata"]["uid"]

        def gone() -> bool:
            return not [p for p in pods(c, "app=qos-hog") if p["metadata"]["uid"] == uid]

        # The hog holds its memory in its pod's cgroup, read from the kernel between the API's looks, so
        # an eviction quicker than the pod's status reaching Running still shows whether the hog ran.
        wait_until(
            "the hog's 1.5 GiB in its cgroup",
            lambda: _cgroup_bytes(hog_pod) >= hog * 0.9 or gone(),
            90,
            every=0.01,
        )
        assert _cgroup_bytes(hog_pod) >= hog * 0.9, (
            f"the hog went before its memory was in (memory use {_used_percent(0):.1f} %, threshold "
            f"{threshold} %); evictions: {_evictions(c)}"
        )
        began = time.monotonic()
        wait_until("the hog gone", gone, 120)
        print(
            f"BE hog evicted and gone {time.monotonic() - began:.1f} s after it ran (threshold {threshold} %)"
        )
    evictions = _evictions(c)
    hog_evictions = [e for e in evictions if e["objectRef"].get("name") == "qos-hog"]
    assert hog_evictions, evictions
    assert hog_evictions[0]["user"]["username"] == "system:serviceaccount:koordinator-system:koordlet"
    assert hog_evictions[0]["responseStatus"]["code"] in (200, 201)
    # The LS pod: never evicted, never restarted, still the same pod.
    assert not [e for e in evictions if e["objectRef"].get("name") == ls["metadata"]["name"]]
    (ls_now,) = pods(c, "app=qos-ls")
    assert ls_now["metadata"]["uid"] == ls["metadata"]["uid"]
    assert ls_now["status"]["containerStatuses"][0]["restartCount"] == 0
