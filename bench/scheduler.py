"""koord-scheduler's throughput, per-pod latency and memory, shaped like kube-scheduler's scheduler_perf
``SchedulingBasic`` (5000 nodes, 1000 pods placed, 10 000 to schedule; and 1000 nodes).

Printed, each beside a floor measured in the same run:
- **algorithm**: pods/s with an in-memory binder (the real queue, cache, profiles and cycles, bindings on
  the binding threads, each bound pod fed back through the pod cache as a watch would), per-cycle p50/p99;
  floor: the same run with a profile of QueueSort and Bind only (the scheduler's own machinery).
  kube-scheduler's CI minimum for this workload is 680 pods/s; the target here is 300.
- **idle cycle**: 100 nodes, one pod at a time: a cycle's p50 after 50 ms of idling (as on an idle
  scheduler, the CPU cold) and after 50 ms of spinning (the core awake, its caches cooled by the rest of
  the machine), beside the same cycles back to back.
- **anti-affinity**: kube-scheduler's ``SchedulingPodAntiAffinity`` (5000 nodes, 1000 pods placed, 2000
  measured, each pod needing a node of its own; kube-scheduler's CI minimum is 60 pods/s), beside the
  basic workload's pods/s at the same node count from the same run.
- **gangs**: 1000 nodes, gangs of 10 (one in 20 cannot fit) in Koordinator's profile: pods/s with every
  gang created at once, and the time from a gang's last member created to all members bound (p50/p99) with
  gangs arriving one by one, beside plain pods on the same cluster and profile (``bench/workloads/gang.py``).
- **reservations**: 1000 nodes, owners scheduled into Available reservations, other pods beside them,
  reservations scheduled as reserve pods, beside plain pods (``bench/workloads/reservation.py``).
- **end to end** against the test API server: pods/s from the first pending pod to the last binding, by
  the real ``koord-scheduler`` process; floor: the server's own bind throughput (16 threads POSTing
  bindings with the official client).
- **quota**: the same algorithm run with 20 ElasticQuotas over the 5000 nodes (:mod:`bench.workloads.quota`),
  beside the plain workload's pods/s of this run.
- **gpu**: 1000 nodes of 8 GPUs (Device objects) and GPU pods, whole and half GPUs, with DeviceShare at
  the points of Koordinator's profile (:mod:`bench.workloads.devices`), beside the plain workload's pods/s
  at 1000 nodes of this run.
- **NUMA**: 1000 nodes of the shared 2-socket simulated topology, each reported by its
  NodeResourceTopology, NodeNUMAResource added to the default profile (:mod:`bench.workloads.numa`): plain
  pods with and without the plugin, LSR pods of 2 CPUs, LSR pods under a ``SingleNUMANode`` policy, beside
  the basic workload's pods/s at 1000 nodes of this run.
- **memory**: the scheduler's RSS with 5000 nodes and 100 000 bound pods cached (``--quick``: 20 000,
  with the per-pod cost), beside the RSS of the same process before the caches are built.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from bench.workloads import affinity, basic, devices, gang, numa, quota, reservation
from koord.scheduler.testing import MemoryScheduler

NAME = "scheduler"
ROOT = Path(__file__).resolve().parents[1]


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return round(s[min(int(q * len(s)), len(s) - 1)] * 1000, 2)


def mib(n: float) -> float:
    return round(n / 2**20, 1)


def algorithm(nodes: int, placed: int, pods: int) -> dict[str, Any]:
    kit = basic.cluster(nodes, placed, parallelism=16)
    run = basic.schedule_all(kit, lambda i: basic.pod(f"p-{i}"), pods)
    kit.stop()
    floor_kit = MemoryScheduler(
        {
            "profiles": [
                {
                    "schedulerName": basic.SCHEDULER,
                    "plugins": {
                        "multiPoint": {"disabled": [{"name": "*"}]},
                        "queueSort": {"enabled": [{"name": "PrioritySort"}]},
                        "bind": {"enabled": [{"name": "DefaultBinder"}]},
                    },
                }
            ]
        },
        parallelism=16,
    )
    for i in range(nodes):
        floor_kit.add_node(basic.node(i))
    floor = basic.schedule_all(floor_kit, lambda i: basic.pod(f"f-{i}"), pods)
    floor_kit.stop()
    assert run["bound"] == pods, run["bound"]
    res = {
        f"pods_per_s_{nodes}": round(pods / run["wall"], 1),
        f"cycle_p50_ms_{nodes}": pct(run["cycles"], 0.5),
        f"cycle_p99_ms_{nodes}": pct(run["cycles"], 0.99),
        f"floor_pods_per_s_{nodes}": round(pods / floor["wall"], 1),
        f"floor_cycle_p50_ms_{nodes}": pct(floor["cycles"], 0.5),
    }
    r = {k.rsplit("_", 1)[0]: v for k, v in res.items()}
    print(
        f"algorithm, {nodes} nodes, {placed} placed, {pods} pods: {r['pods_per_s']} pods/s, "
        f"cycle p50 {r['cycle_p50_ms']} ms p99 {r['cycle_p99_ms']} ms "
        f"(floor, QueueSort+Bind only: {r['floor_pods_per_s']} pods/s, "
        f"cycle p50 {r['floor_cycle_p50_ms']} ms)",
        flush=True,
    )
    return res


def idle_cycles(nodes: int, placed: int, pods: int, gap: float = 0.05) -> dict[str, Any]:
    """One pod at a time, each cycle timed with the previous binding finished: after ``gap`` seconds of
    idling (as a pod arriving on an idle scheduler finds the CPU: caches cold, the core just woken), after
    the same gap spent spinning (the core kept awake: what is left is the caches, which the machine's
    other work cools) and, the floor, back to back (the same code with the CPU warm)."""
    kit = basic.cluster(nodes, placed)
    sched = kit.scheduler

    def spin(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    def cycles(prefix: str, count: int, wait: Callable[[], None]) -> list[float]:
        out = []
        for i in range(count):
            kit.add_pod(basic.pod(f"{prefix}-{i}"))
            sched.drain()
            wait()
            t = time.perf_counter()
            sched.schedule_next(timeout=0)
            out.append(time.perf_counter() - t)
        return out

    cycles("w", 100, lambda: None)
    warm = cycles("b", pods, lambda: None)
    idle = cycles("i", pods, lambda: time.sleep(gap))
    spun = cycles("s", pods, lambda: spin(gap))
    kit.stop()
    res = {
        "idle_cycle_p50_ms": pct(idle, 0.5),
        "spun_cycle_p50_ms": pct(spun, 0.5),
        "back_to_back_cycle_p50_ms": pct(warm, 0.5),
    }
    print(
        f"idle cycle, {nodes} nodes, {placed} placed: p50 {res['idle_cycle_p50_ms']} ms after "
        f"{gap * 1000:.0f} ms idle, {res['spun_cycle_p50_ms']} ms after as long spinning "
        f"(floor, back to back: {res['back_to_back_cycle_p50_ms']} ms)",
        flush=True,
    )
    return res


def anti_affinity(nodes: int, placed: int, pods: int, basic_pods_per_s: float) -> dict[str, Any]:
    work = affinity.pod_anti_affinity(nodes, placed, pods, scheduler_name=basic.SCHEDULER)
    kit = MemoryScheduler({"profiles": [{"schedulerName": basic.SCHEDULER}]}, parallelism=16)
    for n in work.nodes:
        kit.add_node(n)
    basic.schedule_all(kit, lambda i: work.init_pods[i], len(work.init_pods))
    run = basic.schedule_all(kit, lambda i: work.measure_pods[i], len(work.measure_pods))
    kit.stop()
    assert run["bound"] == placed + pods, run["bound"]
    res = {
        "anti_affinity_pods_per_s": round(pods / run["wall"], 1),
        "anti_affinity_cycle_p50_ms": pct(run["cycles"], 0.5),
        "anti_affinity_cycle_p99_ms": pct(run["cycles"], 0.99),
    }
    print(
        f"anti-affinity, {work.name}: {res['anti_affinity_pods_per_s']} pods/s, cycle p50 "
        f"{res['anti_affinity_cycle_p50_ms']} ms p99 {res['anti_affinity_cycle_p99_ms']} ms "
        f"(basic workload at {nodes} nodes, same run: {basic_pods_per_s} pods/s; "
        "kube-scheduler CI minimum 60)",
        flush=True,
    )
    return res


def gangs(nodes: int, count: int, size: int, rate: float) -> dict[str, Any]:
    b = gang.burst(nodes, count, size, unfit_every=20)
    lat = gang.arrivals(nodes, count, size, unfit_every=20, rate=rate)
    res = {
        **b,
        "gang_latency_p50_ms": pct(lat, 0.5),
        "gang_latency_p99_ms": pct(lat, 0.99),
        "gang_rate": rate,
    }
    print(
        f"gangs, {nodes} nodes, {count} gangs of {size} ({count // 20} cannot fit): "
        f"{b['gang_pods_per_s']} pods/s "
        f"(plain pods, same cluster and profile, same run: {b['plain_pods_per_s']} pods/s); last member "
        f"created to gang bound p50 {res['gang_latency_p50_ms']} ms p99 {res['gang_latency_p99_ms']} ms "
        f"(gangs arriving at {rate}/s)",
        flush=True,
    )
    return res


def end_to_end(nodes: int, pods: int) -> dict[str, Any]:
    from kubernetes import client

    from koordshared.kube.client import make_api_client
    from koordshared.testing.ports import port_from_log
    from tests.apiserver import APIServer
    from tests.managerharness import write_kubeconfig

    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-scheduler-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    with APIServer() as server:
        for i in range(nodes):
            server.store.create("nodes", basic.node(i))
        server.store.create("namespaces", {"metadata": {"name": "sched-perf"}})
        kc = write_kubeconfig(work / "kubeconfig", server)
        # floor: the server's own bind throughput, 16 threads POSTing bindings
        floor_pods = max(pods // 2, 100)
        for i in range(floor_pods):
            server.store.create(
                "pods",
                {**basic.pod(f"floor-{i}"), "spec": {**basic.pod("x")["spec"], "schedulerName": "none"}},
            )
        api = make_api_client(str(kc))
        core = client.CoreV1Api(api)
        todo = iter(range(floor_pods))
        lock = threading.Lock()

        def binder() -> None:
            while True:
                with lock:
                    i = next(todo, None)
                if i is None:
                    return
                body = {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": f"floor-{i}"},
                    "target": {"kind": "Node", "name": f"node-{i % nodes:05d}"},
                }
                # (a dict body: the method's validate_call builds the model, its annotation says only that)
                core.create_namespaced_binding("sched-perf", body, _preload_content=False)  # type: ignore[arg-type]

        t0 = time.perf_counter()
        threads = [threading.Thread(target=binder) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        floor_rate = floor_pods / (time.perf_counter() - t0)
        log = work / "koord-scheduler.log"
        with log.open("w") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "koord.scheduler",
                    f"--kubeconfig={kc}",
                    "--addr=127.0.0.1:0",
                    "--no-leader-elect",
                    "--config",
                    str(_config(work)),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )
            try:
                port_from_log(log, proc, timeout=60)
                deadline = time.time() + 60
                while "ready" not in log.read_text() and time.time() < deadline:
                    time.sleep(0.05)
                t0 = time.perf_counter()
                for i in range(pods):
                    server.store.create("pods", basic.pod(f"p-{i}"))
                bound = 0
                while bound < pods and time.perf_counter() - t0 < 600:
                    time.sleep(0.05)
                    items, _ = server.store.list("pods", "sched-perf")
                    bound = sum(
                        1
                        for p in items
                        if p["spec"].get("nodeName") and p["metadata"]["name"].startswith("p-")
                    )
                wall = time.perf_counter() - t0
                rss = psutil.Process(proc.pid).memory_info().rss
            finally:
                proc.terminate()
                proc.wait(30)
        api.close()
    res = {
        f"e2e_pods_per_s_{nodes}": round(bound / wall, 1),
        f"e2e_floor_binds_per_s_{nodes}": round(floor_rate, 1),
        f"e2e_rss_mib_{nodes}": mib(rss),
    }
    print(
        f"end to end, {nodes} nodes, {pods} pods: {res[f'e2e_pods_per_s_{nodes}']} pods/s (floor: the API "
        f"server binds {res[f'e2e_floor_binds_per_s_{nodes}']} pods/s from 16 threads); koord-scheduler RSS "
        f"{res[f'e2e_rss_mib_{nodes}']} MiB",
        flush=True,
    )
    return res


def _config(work: Path) -> Path:
    path = work / "config.yaml"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": basic.SCHEDULER}],
            }
        )
    )
    return path


def memory(nodes: int, pods: int) -> dict[str, Any]:
    """In a fresh process: RSS before and after caching ``nodes`` nodes and ``pods`` bound pods."""
    code = (
        "import gc, json, psutil\n"
        "from bench.workloads import basic\n"
        "from bench.workloads.cluster import make_pod\n"
        "p = psutil.Process(); gc.collect(); base = p.memory_info().rss\n"
        f"kit = basic.cluster({nodes}, 0)\n"
        f"for i in range({pods}):\n"
        f"    kit.add_pod(make_pod(f'node-{{i % {nodes}:05d}}', i // {nodes}, 0.0))\n"
        "gc.collect()\n"
        "print(json.dumps({'base': base, 'rss': p.memory_info().rss, 'cache': kit.cache.counts()}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=1200, check=True
    )
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["cache"][1] == pods, doc
    per_pod = (doc["rss"] - doc["base"]) / pods
    res = {
        f"rss_mib_{nodes}_nodes_{pods // 1000}k_pods": mib(doc["rss"]),
        "rss_floor_mib": mib(doc["base"]),
        "kib_per_pod": round(per_pod / 1024, 2),
        "rss_mib_5000_nodes_100k_pods_estimate": mib(doc["base"] + per_pod * 100_000 * 1.0),
    }
    total = res[f"rss_mib_{nodes}_nodes_{pods // 1000}k_pods"]
    print(
        f"memory, {nodes} nodes, {pods} bound pods: RSS {total} MiB (floor: the process before the caches, "
        f"{res['rss_floor_mib']} MiB; {res['kib_per_pod']} KiB per pod, so "
        f"{res['rss_mib_5000_nodes_100k_pods_estimate']} MiB at 100 000 pods)",
        flush=True,
    )
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (about a minute)")
    opts = parser.parse_args()
    result: dict[str, Any] = {"bench": NAME}
    gc.freeze()
    if opts.quick:
        result.update(algorithm(5000, 1000, 3000))
        result.update(quota.algorithm(5000, 1000, 3000, plain=result["pods_per_s_5000"]))
        result.update(anti_affinity(5000, 1000, 2000, result["pods_per_s_5000"]))
        result.update(algorithm(1000, 1000, 2000))
        result.update(idle_cycles(100, 300, 60))
        result.update(devices.algorithm(1000, 1000, plain=result["pods_per_s_1000"]))
        result.update(numa.algorithm(1000, 2000, 1000, 300, basic_pods_per_s=result["pods_per_s_1000"]))
        result.update(gangs(1000, 100, 10, rate=5.0))
        result.update(reservation.algorithm(1000, 200))
        result.update(end_to_end(500, 1000))
        result.update(memory(5000, 20_000))
    else:
        result.update(algorithm(5000, 1000, 10_000))
        result.update(quota.algorithm(5000, 1000, 10_000, plain=result["pods_per_s_5000"]))
        result.update(anti_affinity(5000, 1000, 2000, result["pods_per_s_5000"]))
        result.update(algorithm(1000, 1000, 10_000))
        result.update(idle_cycles(100, 300, 200))
        result.update(devices.algorithm(1000, 4000, plain=result["pods_per_s_1000"]))
        result.update(numa.algorithm(1000, 10_000, 5000, 1000, basic_pods_per_s=result["pods_per_s_1000"]))
        result.update(gangs(1000, 200, 10, rate=5.0))
        result.update(reservation.algorithm(1000, 500))
        result.update(end_to_end(5000, 5000))
        result.update(memory(5000, 100_000))
    result["target_pods_per_s_5000"] = 300
    result["target_rss_mib_5000_nodes_100k_pods"] = 600
    print(json.dumps(result))


if __name__ == "__main__":
    main()
