"""The slow Koordinator paths of koord-scheduler in memory, each as CPU per pod beside the plain figure of
the same run (the same nodes, plain pods): the process's CPU, so the binding threads count too, and a
shared machine's waiting does not. Pods/s and the cycle's p50 are printed too; they swing with the load.

- **reservation owners**: 300 Available reservations (:mod:`.reservation`) and 300 other pods placed,
  then 300 owners; plain: the Reservation profile's plain pods on the same nodes;
- **GPU pods**: DeviceShare on 8 GPUs a node (:mod:`.devices`), whole and half GPUs;
- **LSR pods under SingleNUMANode**, and LSR pods without a NUMA policy, NodeNUMAResource added
  (:mod:`.numa`); plain: the default profile's pods on the same 16-CPU nodes without the plugin;
- **preemption**: each node full of low-priority pods (four of 1 cpu), 50 preemptors of 1 cpu, each
  nominated in one cycle (none bound: the victims are not deleted): CPU a cycle, the dry run included,
  beside the plain pod's.

    python -m bench.workloads.slowpaths [--nodes 1000]
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Callable
from typing import Any

from bench.workloads import basic, devices, numa, reservation
from koord.scheduler.testing import MemoryScheduler
from koordshared.testing.reservations import available


def measure(kit: MemoryScheduler, make: Callable[[int], dict[str, Any]], count: int) -> dict[str, float]:
    """Schedule ``count`` pods of ``make`` on ``kit`` (then stopped): CPU ms a pod, pods bound a second,
    cycle p50."""
    bound = len(kit.bound())
    gc.collect()  # the garbage of the workload before is not this one's to collect
    cpu, wall = time.process_time(), time.perf_counter()
    run = basic.schedule_all(kit, make, count)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    kit.stop()
    cycles = sorted(run["cycles"])
    return {
        "cpu_ms": round(1000 * cpu / count, 3),
        "pods_per_s": round((run["bound"] - bound) / wall, 1),
        "p50_ms": round(1000 * cycles[len(cycles) // 2], 2) if cycles else 0.0,
    }


def _owners(nodes: int, count: int) -> MemoryScheduler:
    kit = reservation.cluster(nodes)
    now = kit.clock.wall()
    stride = max(nodes // count, 1)
    for i in range(count):
        r = available(reservation._reservation(i, now), f"node-{(i * stride) % nodes:05d}")
        kit.informers["reservations"].put(r)
    basic.schedule_all(kit, lambda i: basic.pod(f"other-{i}"), count)
    return kit


def _full(nodes: int) -> MemoryScheduler:
    kit = basic.cluster(nodes, 0, parallelism=16)
    for i in range(nodes):
        for j in range(4):
            kit.add_pod(_one_cpu(basic.pod(f"low-{i}-{j}", node_name=f"node-{i:05d}", priority=0)))
    return kit


def _one_cpu(pod: dict[str, Any]) -> dict[str, Any]:
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    return pod


def run(nodes: int) -> dict[str, dict[str, float]]:
    out = {
        "reservation owners": measure(_owners(nodes, 300), reservation._owner, 300),
        "plain, Reservation profile": measure(reservation.cluster(nodes), lambda i: basic.pod(f"p-{i}"), 300),
        "GPU pods": measure(devices.cluster(nodes, parallelism=16), devices.pod, 1000),
        "plain, default profile": measure(
            basic.cluster(nodes, 0, parallelism=16), lambda i: basic.pod(f"p-{i}"), 1000
        ),
        "LSR, SingleNUMANode": measure(numa.cluster(nodes), lambda i: numa.lsr(i, single_numa=True), 300),
        "LSR, NodeNUMAResource": measure(numa.cluster(nodes), numa.lsr, 1000),
        "plain, 16-CPU nodes": measure(numa.cluster(nodes, numa=False), lambda i: basic.pod(f"p-{i}"), 1000),
        "preemptor cycle": measure(
            _full(nodes), lambda i: _one_cpu(basic.pod(f"high-{i}", priority=1000)), 50
        ),
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    opts = parser.parse_args()
    gc.freeze()
    load = [round(x, 2) for x in os.getloadavg()]
    got = run(opts.nodes)
    floors = {
        "reservation owners": "plain, Reservation profile",
        "GPU pods": "plain, default profile",
        "LSR, SingleNUMANode": "plain, 16-CPU nodes",
        "LSR, NodeNUMAResource": "plain, 16-CPU nodes",
        "preemptor cycle": "plain, default profile",
    }
    print(f"{opts.nodes} nodes, load average {load} -> {[round(x, 2) for x in os.getloadavg()]}")
    for name, figures in got.items():
        line = f"  {name}: CPU {figures['cpu_ms']} ms a pod, "
        if figures["pods_per_s"]:
            line += f"{figures['pods_per_s']} pods/s, "
        line += f"cycle p50 {figures['p50_ms']} ms"
        floor = floors.get(name)
        if floor is not None:
            ratio = got[floor]["cpu_ms"] / figures["cpu_ms"] if figures["cpu_ms"] else 0.0
            line += f" (plain of this run: {got[floor]['cpu_ms']} ms; plain / this {ratio:.2f})"
        print(line, flush=True)


if __name__ == "__main__":
    main()
