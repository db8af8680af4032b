"""NodeNUMAResource's cost: a cluster of nodes with the shared simulated topology (2 sockets x 2 NUMA nodes
x 2 cores x 2 threads: 16 CPUs, 64 GiB), each reported by its NodeResourceTopology, in the default
profile with NodeNUMAResource added (Koordinator's plugin at its defaults). Measured: plain pods
(``pod-default.yaml``'s) beside the same pods on the same nodes without the plugin, LSR pods of 2 CPUs
(whole cores picked and recorded at Reserve), and LSR pods of 2 CPUs under a pod ``SingleNUMANode`` policy
(NUMA hints merged on every node), beside the basic workload's pods/s at the same node count from the same
run (``plain``)."""

from __future__ import annotations

import json
import time
from typing import Any

from bench.workloads import basic
from koord.scheduler.testing import MemoryScheduler
from koordshared.testing.topology import TWO_SOCKETS, node_resource_topology

PLUGIN = "NodeNUMAResource"


def node(i: int) -> dict[str, Any]:
    out = basic.node(i)
    out["status"]["allocatable"] = out["status"]["capacity"] = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return out


def cluster(nodes: int, *, numa: bool = True) -> MemoryScheduler:
    profile: dict[str, Any] = {"schedulerName": basic.SCHEDULER}
    if numa:
        profile["plugins"] = {"multiPoint": {"enabled": [{"name": PLUGIN}]}}
    kit = MemoryScheduler({"profiles": [profile]}, parallelism=16)
    for i in range(nodes):
        n = node(i)
        kit.add_node(n)
        if numa:
            kit.informers["noderesourcetopologies"].put(
                node_resource_topology(n["metadata"]["name"], TWO_SOCKETS)
            )
    return kit


def lsr(i: int, *, single_numa: bool = False) -> dict[str, Any]:
    out = basic.pod(f"lsr-{i}")
    two = {"cpu": "2", "memory": "1Gi"}
    out["spec"]["containers"][0]["resources"] = {"requests": two, "limits": two}
    out["metadata"]["labels"] = {
        "koordinator.sh/qosClass": "LSR",
        "koordinator.sh/priority-class": "koord-prod",
    }
    if single_numa:
        spec = {"numaTopologyPolicy": "SingleNUMANode"}
        out["metadata"]["annotations"] = {"scheduling.koordinator.sh/numa-topology-spec": json.dumps(spec)}
    return out


def _run(nodes: int, make: Any, count: int, *, numa: bool = True) -> tuple[float, int, float]:
    kit = cluster(nodes, numa=numa)
    run = basic.schedule_all(kit, make, count)
    kit.stop()
    cycles = sorted(run["cycles"])
    p50 = cycles[len(cycles) // 2] * 1000 if cycles else 0.0
    return round(len(run["cycles"]) / run["wall"], 1), run["bound"], round(p50, 2)


def algorithm(
    nodes: int, plain: int, lsr_pods: int, single: int, *, basic_pods_per_s: float
) -> dict[str, Any]:
    """``plain`` plain pods with and without the plugin, ``lsr_pods`` LSR pods, ``single`` LSR
    SingleNUMANode pods, each run on a fresh cluster of ``nodes`` nodes."""
    t0 = time.perf_counter()
    floor, _, floor_p50 = _run(nodes, lambda i: basic.pod(f"p-{i}"), plain, numa=False)
    with_plugin, _, plain_p50 = _run(nodes, lambda i: basic.pod(f"p-{i}"), plain)
    lsr_rate, lsr_bound, lsr_p50 = _run(nodes, lsr, lsr_pods)
    single_rate, single_bound, single_p50 = _run(nodes, lambda i: lsr(i, single_numa=True), single)
    assert lsr_bound == lsr_pods and single_bound == single, (lsr_bound, single_bound)
    res = {
        f"numa_plain_pods_per_s_{nodes}": with_plugin,
        f"numa_plain_without_plugin_pods_per_s_{nodes}": floor,
        f"numa_lsr_pods_per_s_{nodes}": lsr_rate,
        f"numa_lsr_single_numa_pods_per_s_{nodes}": single_rate,
        f"numa_cycle_p50_ms_{nodes}": {
            "plain": plain_p50,
            "without": floor_p50,
            "lsr": lsr_p50,
            "single": single_p50,
        },
    }
    print(
        f"NodeNUMAResource, {nodes} nodes of 16 CPUs with topology: plain pods {with_plugin} pods/s "
        f"(without the plugin {floor}), LSR 2-CPU pods {lsr_rate} pods/s, LSR SingleNUMANode {single_rate} "
        f"pods/s; cycle p50 ms {res[f'numa_cycle_p50_ms_{nodes}']} "
        f"(basic workload, same run: {basic_pods_per_s} pods/s; {time.perf_counter() - t0:.0f}s)",
        flush=True,
    )
    return res
