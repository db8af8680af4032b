"""Real-kernel end-to-end of the priority-based and allocatable evictions: pods (real processes)
in real cgroups under a test kubepods parent, the real agent standalone with a NodeSLO file and a pod list
that carries the pods' labels (priority class, ``koordinator.sh/eviction-enabled``).

* ``MemoryEvict``: memory past the threshold kills the opted-in koord-batch pod; the koord-prod pod and
  the batch pod not opted in are untouched.
* ``CPUEvict``: node CPU past the threshold (two busy pods on this machine's CPUs) kills the opted-in
  koord-batch pod, not the koord-prod one.
* The allocatable strategies and ``BECPUEvict`` by allocatable, standalone: no Node reports batch or mid
  allocatable, so they are unknown and nobody is evicted (a zero would have evicted every pod).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from koordlet.api import KubeQOSClass
from koordlet.testing import wait_until
from koordlet.testing.agent import Agent, http_get
from koordlet.testing.cgroups import ALLOC, RealKubepods, RealPod

pytestmark = pytest.mark.root
CPUS = os.cpu_count() or 1
OPTED_IN = {"koordinator.sh/eviction-enabled": "true"}


def node_slo(tmp: Path, **strategy: object) -> Path:
    path = tmp / "nodeslo.json"
    spec = {"resourceUsedThresholdWithBE": {"enable": True, **strategy}}
    path.write_text(
        json.dumps({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "spec": spec})
    )
    return path


def pod_list(tmp: Path, pods: dict[str, tuple[RealPod, str, dict[str, str], dict[str, Any]]]) -> Path:
    """``name -> (pod, priority class, extra labels, container resources)`` as a PodList file."""
    items = []
    for name, (pod, priority_class, labels, resources) in pods.items():
        qos = {KubeQOSClass.BESTEFFORT: "BestEffort", KubeQOSClass.BURSTABLE: "Burstable"}[pod.qos]
        items.append(
            {
                "metadata": {
                    "uid": pod.uid,
                    "name": name,
                    "namespace": "e2e",
                    "labels": {"koordinator.sh/priority-class": priority_class, **labels},
                },
                "spec": {"containers": [{"name": "main", "resources": resources}]},
                "status": {"qosClass": qos, "phase": "Running"},
            }
        )
    path = tmp / "pods.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "PodList", "items": items}))
    return path


def meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        out[key] = int(rest.split()[0]) * 1024
    return out


def evictions(agent: Agent) -> list[dict[str, Any]]:
    return [e for e in agent.get("/events?limit=100")["events"] if e["resource"] == "pod/eviction"]


def test_memory_evict_kills_the_opted_in_batch_pod_only(tmp_path: Path, kubepods: RealKubepods) -> None:
    info = meminfo()
    total, used = info["MemTotal"], info["MemTotal"] - info["MemAvailable"]
    threshold = int(used * 100 // total) + 4
    alloc_mib = int(total * 0.08 / 2**20)  # about 8 % of the node: past the threshold
    batch, prod, shy = (kubepods.add_pod(KubeQOSClass.BURSTABLE) for _ in range(3))
    batch_c, prod_c, shy_c = (kubepods.add_container(p) for p in (batch, prod, shy))
    prod_proc = kubepods.spawn(prod_c, ALLOC, "16", "32", "0")
    shy_proc = kubepods.spawn(shy_c, ALLOC, "16", "32", "0")
    pods = pod_list(
        tmp_path,
        {
            "batch-opted-in": (batch, "koord-batch", OPTED_IN, {}),
            "prod-opted-in": (prod, "koord-prod", OPTED_IN, {}),
            "batch-not-opted-in": (shy, "koord-batch", {}, {}),
        },
    )
    slo = node_slo(tmp_path, memoryEvictThresholdPercent=threshold, evictEnabledPriorityThreshold=5999)
    agent = Agent(
        tmp_path,
        f"--cgroup-root=/{kubepods.parent}",
        f"--pod-list={pods}",
        f"--node-slo-file={slo}",
        "--feature-gates=MemoryEvict=true,BECPUSuppress=false",
    )
    try:
        agent.wait_ready()
        batch_proc = kubepods.spawn(batch_c, ALLOC, "64", str(alloc_mib), "0.02")
        assert wait_until(lambda: batch_proc.poll() is not None, 40, step=0.1), agent.tail()
        assert batch_proc.returncode == -9
        assert prod_proc.poll() is None and shy_proc.poll() is None
        found = evictions(agent)
        assert found and {e["before"] for e in found} == {batch.uid}
        assert "trigger by koordlet feature MemoryEvict" in found[0]["reason"]
    finally:
        code = agent.stop()
    assert code == 0, agent.tail()


def test_cpu_evict_kills_the_opted_in_batch_pod_only(tmp_path: Path, kubepods: RealKubepods) -> None:
    batch, prod = kubepods.add_pod(KubeQOSClass.BURSTABLE), kubepods.add_pod(KubeQOSClass.BURSTABLE)
    batch_c, prod_c = kubepods.add_container(batch), kubepods.add_container(prod)
    prod_procs = [kubepods.busy(prod_c) for _ in range(max(CPUS // 2, 1))]
    batch_procs = [kubepods.busy(batch_c) for _ in range(max(CPUS - CPUS // 2, 1))]
    pods = pod_list(
        tmp_path,
        {
            "batch-opted-in": (batch, "koord-batch", OPTED_IN, {}),
            "prod-opted-in": (prod, "koord-prod", OPTED_IN, {}),
        },
    )
    # The two pods keep every CPU busy: the node is near 100 %, past 80 % whatever else runs
    slo = node_slo(tmp_path, cpuEvictThresholdPercent=80, evictEnabledPriorityThreshold=5999)
    agent = Agent(
        tmp_path,
        f"--cgroup-root=/{kubepods.parent}",
        f"--pod-list={pods}",
        f"--node-slo-file={slo}",
        "--feature-gates=CPUEvict=true,BECPUSuppress=false",
        "--cpu-evict-cool-time-seconds=2",
    )
    try:
        agent.wait_ready()
        gone = wait_until(lambda: all(p.poll() is not None for p in batch_procs), 60, step=0.2)
        assert gone, agent.tail()
        assert all(p.returncode == -9 for p in batch_procs)
        assert all(p.poll() is None for p in prod_procs)
        found = evictions(agent)
        assert {e["before"] for e in found} == {batch.uid}
        assert "trigger by koordlet feature CPUEvict" in found[0]["reason"]
    finally:
        code = agent.stop()
    assert code == 0, agent.tail()


def test_standalone_allocatable_evictions_evict_nobody(tmp_path: Path, kubepods: RealKubepods) -> None:
    """No Node, so batch and mid allocatable are unknown: ``BECPUEvict`` by allocatable, and both
    allocatable strategies, evict nobody. The node info used to say 0, read as 1m batch-cpu:
    BE at 0.0x % satisfaction, and every BE pod went."""
    be_pods = [kubepods.add_pod(KubeQOSClass.BESTEFFORT) for _ in range(4)]
    procs = [kubepods.busy(kubepods.add_container(p)) for p in be_pods]
    batch = {"requests": {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "1Gi"}}
    labels = {"koordinator.sh/qosClass": "BE", **OPTED_IN}
    pods = pod_list(tmp_path, {f"be-{i}": (p, "koord-batch", labels, batch) for i, p in enumerate(be_pods)})
    slo = node_slo(
        tmp_path,
        cpuEvictPolicy="evictByAllocatable",
        cpuEvictBESatisfactionLowerPercent=60,
        cpuEvictBESatisfactionUpperPercent=80,
        cpuAllocatableEvictThresholdPercent=10,
        cpuAllocatableEvictLowerPercent=5,
        memoryAllocatableEvictThresholdPercent=10,
        memoryAllocatableEvictLowerPercent=5,
        allocatableEvictPriorityThreshold=7999,
    )
    agent = Agent(
        tmp_path,
        f"--cgroup-root=/{kubepods.parent}",
        f"--pod-list={pods}",
        f"--node-slo-file={slo}",
        "--feature-gates=BECPUEvict=true,CPUAllocatableEvict=true,MemoryAllocatableEvict=true,"
        "BEMemoryEvict=true,BECPUSuppress=false",
        "--cpu-evict-cool-time-seconds=1",
        "--memory-evict-cool-time-seconds=1",
    )
    try:
        agent.wait_ready()
        # Rounds past both cool-downs: the evictors' ticks are counted on /metrics
        assert wait_until(lambda: evictor_ticks(agent) >= 2 * 8, 60, step=0.5), agent.tail()
        assert evictions(agent) == []
        assert all(p.poll() is None for p in procs)
    finally:
        code = agent.stop()
    assert code == 0, agent.tail()


def evictor_ticks(agent: Agent) -> int:
    _status, body = http_get(agent.base + "/metrics")
    text = body.decode()
    counts = re.findall(
        r'koordlet_tick_duration_seconds_count\{component="plugin/BE(?:CPU|Memory)Evict"\} (\S+)', text
    )
    return int(sum(float(c) for c in counts)) if len(counts) == 2 else 0
