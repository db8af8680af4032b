"""One LowNodeLoad round over 1000 nodes and 30 000 pods: milliseconds per round and memory.

The real koord-descheduler framework (profile, LowNodeLoad, MigrationController in a dry run, the round
limiter) runs over its shared caches fed in memory with trimmed objects: 1000 nodes of 16 cores, 30
pods each (realistic pods: owners, labels, annotations, requests), one NodeMetric per node reporting
every pod; a tenth of the nodes are over the 75 % cpu threshold, the rest under 45 %. Each round acts
(``consecutiveAbnormalities: 1``) and decides two evictions per hot node (the default per-node limit).

Figures: ``first_round_ms`` (every NodeMetric and pod seen for the first time), ``round_ms`` (median of
steady rounds, in each of which a sixth of the NodeMetrics are new objects, as agents report every 60 s
and rounds run every 10 s), ``floor_ms`` (the arithmetic alone: summing the already-parsed usage of
every reported pod per node and comparing it with its thresholds, in a plain loop), ``rss_mib`` (the
process after the rounds) and ``cache_mib`` (what the caches added). ``ratio`` = ``round_ms`` /
``floor_ms``. Target: ``round_ms`` < 1000.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil

from koord.descheduler.app import plugin_registry
from koord.descheduler.framework.profile import parse_profiles
from koord.descheduler.framework.runtime import Environment, Framework
from koord.descheduler.informers import MemoryInformers
from koord.descheduler.testing import NoEvents
from koordshared.apis.core.node import is_ready
from koordshared.apis.meta.quantity import format_bytes, format_milli, format_time

NAME = "descheduler"
PODS_PER_NODE = 30
GiB = 2**30
NODE_CPU = 16000
HOT_EVERY = 10


def rss() -> int:
    gc.collect()
    return int(psutil.Process().memory_info().rss)


def mib(n: float) -> float:
    return round(n / 2**20, 1)


def make_node(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"node-{i:05d}",
            "uid": f"uid-node-{i:05d}",
            "resourceVersion": str(i + 1),
            "labels": {
                "kubernetes.io/hostname": f"node-{i:05d}",
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
                "node.kubernetes.io/instance-type": "m5.4xlarge",
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": f"10.{i // 256}.{i % 256}.0/24"},
        "status": {
            "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def make_pod(node: int, j: int) -> dict[str, Any]:
    name = f"app-{node:05d}-{j:02d}"
    batch = j % 3 != 0
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": f"team-{j % 5}",
            "uid": f"uid-{name}",
            "resourceVersion": str(10_000 + node * PODS_PER_NODE + j),
            "creationTimestamp": format_time(1_700_000_000 + node * 60 + j),
            "labels": {
                "app": f"app-{j % 7}",
                "pod-template-hash": "5d8f7c9b6",
                "koordinator.sh/priority-class": "koord-batch" if batch else "koord-prod",
            },
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2024-01-01T00:00:00Z"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"app-{j % 7}",
                    "uid": f"rs-{j % 7}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": f"node-{node:05d}",
            "priority": 5500 if batch else 9500,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/app:1.2.3",
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"memory": "256Mi"},
                    },
                    "env": [{"name": "MODE", "value": "production"}],
                }
            ],
            "volumes": [{"name": "token", "projected": {"sources": []}}],
        },
        "status": {
            "phase": "Running",
            "qosClass": "Burstable",
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod_usage(node: int) -> int:
    """cpu millicores per pod: hot nodes at 90 %, the others at 30 %."""
    share = 0.9 if node % HOT_EVERY == 0 else 0.3
    return int(NODE_CPU * share / PODS_PER_NODE)


def make_metric(node: int, now: float) -> dict[str, Any]:
    cpu = pod_usage(node)
    usage = {"resources": {"cpu": format_milli(cpu), "memory": format_bytes(GiB)}}
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": f"node-{node:05d}"},
        "status": {
            "updateTime": format_time(now),
            "nodeMetric": {
                "nodeUsage": {
                    "resources": {"cpu": format_milli(cpu * PODS_PER_NODE), "memory": format_bytes(30 * GiB)}
                },
                "systemUsage": {"resources": {"cpu": "0", "memory": "0"}},
            },
            "podsMetric": [
                {
                    "namespace": f"team-{j % 5}",
                    "name": f"app-{node:05d}-{j:02d}",
                    "podUsage": usage,
                    "priority": "koord-batch",
                    "qos": "BE",
                }
                for j in range(PODS_PER_NODE)
            ],
        },
    }


def framework(informers: MemoryInformers) -> Framework:
    (profile,) = parse_profiles(
        [
            {
                "name": "bench",
                "plugins": {"balance": {"enabled": [{"name": "LowNodeLoad"}]}},
                "pluginConfig": [
                    {
                        "name": "LowNodeLoad",
                        "args": {
                            "lowThresholds": {"cpu": 45, "memory": 55},
                            "highThresholds": {"cpu": 75, "memory": 80},
                            "anomalyCondition": {"consecutiveAbnormalities": 1},
                        },
                    },
                    {"name": "MigrationController", "args": {"objectLimiters": {}}},
                ],
            }
        ],
        "profiles",
    )
    env = Environment(client=None, informers=informers, recorder=NoEvents(), dry_run=True, interval=10.0)
    return Framework(profile, plugin_registry(entry_points=lambda: []), env)


def run_round(fw: Framework, informers: MemoryInformers) -> tuple[float, int]:
    t0 = time.perf_counter()
    nodes = [n for n in informers.nodes.objects() if is_ready(n)]
    fw.env.limiter.reset()
    fw.begin_round()
    errors = fw.run_deschedule(nodes) + fw.run_balance(nodes)
    ms = (time.perf_counter() - t0) * 1000
    if errors:
        raise SystemExit(f"round failed: {errors}")
    return ms, fw.env.limiter.total


def floor_round(usage: dict[str, list[int]], thresholds: dict[str, tuple[int, int]]) -> float:
    t0 = time.perf_counter()
    classes: dict[str, str] = {}
    for name, pods in usage.items():
        total = 0
        for cpu in pods:
            total += cpu
        low, high = thresholds[name]
        classes[name] = "source" if total > high else "low" if total <= low else "between"
    if sum(1 for c in classes.values() if c == "source") == 0:
        raise SystemExit("floor found no source")
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (under 50 s)")
    parser.add_argument("--nodes", type=int, default=1000)
    args = parser.parse_args()
    rounds = 5 if args.quick else 15
    n = args.nodes
    base = rss()
    now = time.time()
    informers = MemoryInformers(
        nodes=[make_node(i) for i in range(n)],
        pods=[make_pod(i, j) for i in range(n) for j in range(PODS_PER_NODE)],
        node_metrics=[make_metric(i, now) for i in range(n)],
    )
    cached = rss()
    fw = framework(informers)
    first_ms, decided = run_round(fw, informers)
    hot = len(range(0, n, HOT_EVERY))
    if decided != 2 * hot:
        raise SystemExit(f"expected {2 * hot} dry-run evictions (2 per hot node), got {decided}")
    steady, floors = [], []
    usage = {f"node-{i:05d}": [pod_usage(i)] * PODS_PER_NODE for i in range(n)}
    thresholds = dict.fromkeys(usage, (int(0.45 * NODE_CPU), int(0.75 * NODE_CPU)))
    for r in range(rounds):
        fresh = time.time()
        for i in range(r % 6, n, 6):  # a sixth of the agents reported since the last round
            informers.node_metrics.put(make_metric(i, fresh))
        gc.collect()
        ms, decided = run_round(fw, informers)
        if decided != 2 * hot:
            raise SystemExit(f"round {r}: {decided} decisions")
        steady.append(ms)
        floors.append(floor_round(usage, thresholds))
    round_ms = statistics.median(steady)
    floor_ms = statistics.median(floors)
    after = rss()
    print(f"{n} nodes, {n * PODS_PER_NODE} pods, {hot} hot nodes, {decided} dry-run evictions per round")
    print(f"first round     {first_ms:8.1f} ms   (every NodeMetric and pod parsed)")
    print(f"steady round    {round_ms:8.1f} ms   (median of {rounds}; p100 {max(steady):.1f} ms)")
    print(f"floor           {floor_ms:8.2f} ms   (summing parsed usage and comparing, plain loop)")
    print(f"rss             {mib(after):8.1f} MiB  (caches {mib(cached - base)} MiB)")
    print(
        json.dumps(
            {
                "bench": NAME,
                "nodes": n,
                "pods": n * PODS_PER_NODE,
                "first_round_ms": round(first_ms, 1),
                "round_ms": round(round_ms, 1),
                "floor_ms": round(floor_ms, 2),
                "rss_mib": mib(after),
                "cache_mib": mib(cached - base),
                "ratio": round(round_ms / floor_ms, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
