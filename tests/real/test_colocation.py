"""The colocation loop on real pods: the kubelet runs an LS Deployment and BE pods, the agent finds their
cgroups where the kubelet made them and reports their usage, koord-manager turns the node's free CPU into
``batch-cpu`` on the real Node (and takes it back when LS rises), koord-scheduler places BE pods by it
and the kubelet admits them, and the agent's BatchResource hook writes their batch limits into the real
containers' cgroups."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real.objects import (
    BURN,
    COLOCATION,
    IDLE,
    apply,
    batch_allocatable,
    be_pod,
    container_cgroup,
    delete,
    get,
    ls_deployment,
    node_cpu_milli,
    node_metric,
    pod_cgroup,
    pod_usage,
    pods,
    slo_config,
    wait_for_room,
    wait_running,
)
from tests.realcluster.cluster import Cluster
from tests.realcluster.procs import wait_until


@pytest.fixture(scope="module")
def colocation(cluster: Cluster) -> Iterator[Cluster]:
    with slo_config(cluster, colocation_config=COLOCATION):
        yield cluster
        delete(cluster, "deployment", "ls-web", "ls-spike")
        delete(cluster, "pod", "be-fits", "be-too-big")


def test_agent_reports_real_pods_and_manager_publishes_batch_resources(colocation: Cluster) -> None:
    # Proves against: the kubelet's cgroupfs layout and /pods, kube-apiserver storing NodeMetric and
    # the Node's extended resources.
    c = colocation
    apply(c, ls_deployment("ls-web", IDLE))
    (web,) = wait_running(c, "app=ls-web")
    assert pod_cgroup(web).is_dir(), pod_cgroup(web)

    def reported() -> bool:
        return pod_usage(node_metric(c), web["metadata"]["name"]) is not None

    wait_until("the LS pod in the NodeMetric", reported, 60)
    wait_until("batch-cpu on the Node", lambda: batch_allocatable(c)[0] > 0, 60)
    cpu, memory = batch_allocatable(c)
    print(f"batch-cpu {cpu}m, batch-memory {memory >> 20} MiB with LS idle")
    assert memory > 0


def test_batch_cpu_falls_when_ls_usage_rises(colocation: Cluster) -> None:
    # Proves against: the real kernel's CPU accounting of a kubelet-made container, the Node's status.
    c = colocation
    # A core free, so a burning LS container raises the node's use instead of taking CPU from others.
    wait_for_room(c, batch_cpu=400, cpu_percent=50)
    idle_batch = batch_allocatable(c)[0]
    idle_node = node_cpu_milli(c)
    apply(c, ls_deployment("ls-spike", BURN, cpu="500m"))
    (spike,) = wait_running(c, "app=ls-spike")
    name = spike["metadata"]["name"]
    seen: dict[str, float] = {}

    def burning() -> bool:
        usage = pod_usage(node_metric(c), name) or {}
        from koordshared.apis.meta.quantity import parse_quantity

        seen["cpu"] = float(parse_quantity(usage.get("cpu", "0")))
        return seen["cpu"] >= 0.3

    wait_until("the LS spike's usage in the NodeMetric", burning, 60)
    # The manager's formula takes what the node uses (less BE) from what it can give: the node's rise as
    # the NodeMetric reports it must come off, half of it at least (the rest of the machine moves too).
    rise = node_cpu_milli(c) - idle_node
    assert rise >= 200, f"the node's use rose {rise}m only with an LS pod burning {seen['cpu']:.2f} cores"
    want = idle_batch - rise // 2
    wait_until(
        f"batch-cpu under {want}m (was {idle_batch}m, the node's use rose {rise}m)",
        lambda: batch_allocatable(c)[0] <= want,
        60,
    )
    print(f"batch-cpu {idle_batch}m -> {batch_allocatable(c)[0]}m after the node's use rose {rise}m")
    delete(c, "deployment", "ls-spike")


def test_koord_scheduler_places_be_pods_by_batch_resources(colocation: Cluster) -> None:
    # Proves against: the kubelet's admission of extended resources, real Binding, the real cgroups
    # the BatchResource hook writes.
    c = colocation
    # LoadAwareScheduling (deploy/'s profile) refuses a node over 65 % CPU: wait for one under it.
    wait_for_room(c, batch_cpu=300, cpu_percent=55)
    free_cpu, _ = batch_allocatable(c)
    apply(c, be_pod("be-fits", BURN, batch_cpu=200, batch_memory="64Mi"))
    (fits,) = wait_running(c, "app=be-fits")
    assert fits["spec"]["nodeName"] == c.node_name
    assert fits["status"]["qosClass"] == "BestEffort"
    # More batch-cpu than the node has: koord-scheduler keeps it pending with kube-scheduler's words.
    apply(c, be_pod("be-too-big", BURN, batch_cpu=free_cpu + 4000))
    wait_until(
        "be-too-big reported unschedulable",
        lambda: any(
            cond.get("reason") == "Unschedulable"
            and "Insufficient kubernetes.io/batch-cpu" in cond.get("message", "")
            for cond in get(c, "pod", "be-too-big")["status"].get("conditions", [])
        ),
        60,
    )
    assert not get(c, "pod", "be-too-big")["spec"].get("nodeName")
    # BatchResource: the batch limits as CFS quota and memory limit on the pod and its container.
    fits = next(p for p in pods(c, "app=be-fits"))
    expect_quota = str(200 * 100)  # 200 milli-cores of a 100 ms period
    for level in (pod_cgroup(fits), container_cgroup(fits)):

        def quota_set(level: Path = level) -> bool:
            return (level / "cpu.cfs_quota_us").read_text().strip() == expect_quota

        wait_until(f"cfs quota {expect_quota} on {level.name}", quota_set, 30)
    mem = container_cgroup(fits, "memory") / "memory.limit_in_bytes"
    wait_until(f"64 MiB limit on {mem.parent.name}", lambda: int(mem.read_text()) == 64 << 20, 30)
