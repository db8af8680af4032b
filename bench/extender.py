"""koord-scheduler-extender's filter and prioritize at 1000 and 5000 nodes, against the floor of decoding
and encoding the same JSON, and its memory with 5000 nodes and 100 000 pods cached.

The real extender (framework, LoadAwareScheduling, caches, HTTP server on loopback) is fed in memory:
nodes, NodeMetrics (20 pods each in ``podsMetric``, three aggregation windows) and 20 bound pods per node
of realistic size (labels, annotations, ``managedFields``, env, probes, volumes), trimmed as the pod
informer trims them. A client on one kept-alive connection, as kube-scheduler's, sends cache-capable
calls (``NodeNames``) for a Burstable pod; a quarter of the nodes are over the cpu threshold. Rounds
alternate the call with its floor: ``json.loads`` of the request body plus ``json.dumps`` of an answer of
the same shape. ``ratio`` = extender p99 / floor p99 at 5000 nodes (filter).
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import time
from typing import Any

import psutil
from prometheus_client import CollectorRegistry

from koord.apis.timefmt import format_time
from koord.kube.informer import index_by_node
from koord.kube.memstore import MemoryStore
from koord.scheduler.extender.app import freeze_heap
from koord.scheduler.extender.handle import ClusterHandle, compact, slim_node, slim_pod
from koord.scheduler.extender.metrics import ExtenderMetrics
from koord.scheduler.extender.server import ExtenderServer
from koord.scheduler.extender.verbs import Extender
from koord.scheduler.framework.profile import default_profile
from koord.scheduler.framework.registry import discover
from koord.scheduler.framework.runtime import Framework
from koord.scheduler.plugins import BUILTIN

NAME = "extender"
PODS_PER_NODE = 20
GiB = 2**30


def mib(n: float) -> float:
    return round(n / 2**20, 1)


def rss() -> int:
    gc.collect()
    return int(psutil.Process().memory_info().rss)


def make_node(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-uid-{i}",
            "resourceVersion": str(i + 1),
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
                "pool": "default",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "managedFields": [
                {"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {"f:conditions": {}}}}
            ],
        },
        "spec": {"podCIDR": f"10.{i // 256}.{i % 256}.0/24"},
        "status": {
            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "conditions": [
                {"type": t, "status": "False" if t != "Ready" else "True"}
                for t in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
            ],
            "images": [
                {"names": [f"registry.example.com/app-{k}:v1.{k}"], "sizeBytes": 100_000_000 + k}
                for k in range(30)
            ],
        },
    }


def make_pod(node: str, j: int, now: float) -> dict[str, Any]:
    name = f"{node}-app-{j:02d}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": f"team-{j % 10}",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "labels": {"app": f"app-{j}", "pod-template-hash": "7d9f8c6b5", "koordinator.sh/qosClass": "LS"},
            "annotations": {
                "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z",
                "prometheus.io/scrape": "true",
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"app-{j}-7d9f8c6b5",
                    "uid": f"rs-{j}",
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "fieldsV1": {"f:spec": {"f:containers": {}}},
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "schedulerName": "default-scheduler",
            "priority": 0,
            "containers": [
                {
                    "name": "app",
                    "image": f"registry.example.com/app-{j}:v1.{j}",
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "1Gi"},
                        "limits": {"cpu": "1", "memory": "2Gi"},
                    },
                    "env": [{"name": f"VAR_{k}", "value": f"value-{k}"} for k in range(8)],
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "volumeMounts": [
                        {"name": "config", "mountPath": "/etc/app"},
                        {"name": "token", "mountPath": "/var/run/secrets"},
                    ],
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
                    "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080}, "periodSeconds": 5},
                }
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": f"app-{j}"}},
                {"name": "token", "projected": {"sources": []}},
            ],
        },
        "status": {
            "phase": "Running",
            "qosClass": "Burstable",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": format_time(now - 3600)}
            ],
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": True,
                    "restartCount": 0,
                    "image": "x",
                    "containerID": f"containerd://{name}",
                }
            ],
        },
    }


def make_metric(node: str, cpu: int, now: float) -> dict[str, Any]:
    def usage(c: int, m: int) -> dict[str, Any]:
        return {"resources": {"cpu": f"{c}m", "memory": str(m)}}

    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": node},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        "status": {
            "updateTime": format_time(now - 10),
            "nodeMetric": {
                "nodeUsage": usage(cpu, 40 * GiB),
                "systemUsage": usage(1000, 2 * GiB),
                "aggregatedNodeUsages": [
                    {
                        "duration": d,
                        "usage": {t: usage(cpu, 40 * GiB) for t in ("avg", "p50", "p90", "p95", "p99")},
                    }
                    for d in ("5m0s", "10m0s", "30m0s")
                ],
            },
            "podsMetric": [
                {
                    "namespace": f"team-{j % 10}",
                    "name": f"{node}-app-{j:02d}",
                    "podUsage": usage(400, GiB),
                    "priority": "koord-prod",
                    "qos": "LS",
                }
                for j in range(PODS_PER_NODE)
            ],
        },
    }


def as_watched(obj: dict[str, Any]) -> Any:
    """The object as a watch event delivers it: decoded from its own JSON (no key shared with others)."""
    return json.loads(json.dumps(obj))


class Setup:
    """A served extender over ``n`` nodes with ``PODS_PER_NODE`` pods each."""

    def __init__(self, n: int) -> None:
        now = time.time()
        self.nodes = MemoryStore(transform=slim_node)
        self.pods = MemoryStore(indexers={"node": index_by_node}, transform=slim_pod)
        self.metrics = MemoryStore(transform=compact)
        handle = ClusterHandle(self.nodes, self.pods, self.metrics)
        self.framework = Framework(default_profile(), discover(BUILTIN), handle)
        self.extender = Extender(
            self.framework, handle, ExtenderMetrics(CollectorRegistry()), ready=lambda: True
        )
        self.names = []
        for i in range(n):
            node = make_node(i)
            name = node["metadata"]["name"]
            self.names.append(name)
            self.nodes.put(as_watched(node))
            for j in range(PODS_PER_NODE):
                self.pods.put(as_watched(make_pod(name, j, now)))
            # a quarter over the 65 % cpu threshold, the rest spread from 10 % to 60 %
            cpu = 24000 if i % 4 == 0 else 3200 + (i * 7919) % 16000
            self.metrics.put(as_watched(make_metric(name, cpu, now)))
        freeze_heap()  # as the process does once its caches have synced
        self.server = ExtenderServer("127.0.0.1", 0, self.extender, ready=lambda: True)
        self.server.start()
        self.conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        incoming = make_pod("", 99, now)
        incoming["metadata"].update(name="incoming", namespace="default", uid="incoming-uid")
        incoming["spec"].pop("nodeName")
        incoming["status"] = {}
        self.body = json.dumps({"Pod": incoming, "Nodes": None, "NodeNames": self.names}).encode()

    def call(self, verb: str) -> bytes:
        self.conn.request("POST", f"/{verb}", body=self.body, headers={"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        data = resp.read()
        assert resp.status == 200, data[:200]
        return data

    def close(self) -> None:
        self.conn.close()
        self.server.shutdown()


def timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return round(s[min(len(s) - 1, round(q * (len(s) - 1)))], 3)


def latencies(s: Setup, n: int, rounds: int) -> dict[str, float]:
    filter_answer = json.loads(s.call("filter"))
    prio_answer = json.loads(s.call("prioritize"))
    assert filter_answer["Error"] == "" and 0 < len(filter_answer["NodeNames"]) < n, filter_answer["Error"]
    assert len(prio_answer) == n and max(h["Score"] for h in prio_answer) <= 10

    def filter_floor() -> None:
        json.loads(s.body)
        json.dumps(filter_answer).encode()

    def prio_floor() -> None:
        json.loads(s.body)
        json.dumps(prio_answer).encode()

    out: dict[str, list[float]] = {
        k: [] for k in ("filter", "filter_floor", "prioritize", "prioritize_floor")
    }
    for _ in range(rounds):
        out["filter"].append(timed(lambda: s.call("filter")))
        out["filter_floor"].append(timed(filter_floor))
        out["prioritize"].append(timed(lambda: s.call("prioritize")))
        out["prioritize_floor"].append(timed(prio_floor))
    res = {f"{k}_p{int(q * 100)}_ms_{n}": pct(v, q) for k, v in out.items() for q in (0.5, 0.99)}
    print(
        f"{n:5d} nodes, {rounds} rounds: "
        f"filter p50 {res[f'filter_p50_ms_{n}']} ms p99 {res[f'filter_p99_ms_{n}']} ms "
        f"(floor p50 {res[f'filter_floor_p50_ms_{n}']} p99 {res[f'filter_floor_p99_ms_{n}']}); "
        f"prioritize p50 {res[f'prioritize_p50_ms_{n}']} ms p99 {res[f'prioritize_p99_ms_{n}']} ms "
        f"(floor p50 {res[f'prioritize_floor_p50_ms_{n}']} p99 {res[f'prioritize_floor_p99_ms_{n}']})",
        flush=True,
    )
    return res


def bench_size(n: int, rounds: int, *, memory: bool = False) -> dict[str, float]:
    """Build ``n`` nodes (``memory``: and report the RSS they take), then time the calls."""
    base = rss()
    t0 = time.perf_counter()
    s = Setup(n)
    built = time.perf_counter() - t0
    res: dict[str, float] = {}
    try:
        if memory:
            total = rss()
            sizes = s.extender.cache_sizes()
            assert sizes["pods"] == n * PODS_PER_NODE
            print(
                f"memory: {sizes['nodes']} nodes, {sizes['pods']} pods, {sizes['nodemetrics']} NodeMetrics "
                f"cached in {built:.1f}s: RSS {mib(total)} MiB ({mib(total - base)} MiB for the caches)",
                flush=True,
            )
            res[f"rss_mib_{n}_nodes_{sizes['pods'] // 1000}k_pods"] = mib(total)
            res[f"cache_mib_{n}_nodes_{sizes['pods'] // 1000}k_pods"] = mib(total - base)
        res.update(latencies(s, n, rounds))
    finally:
        s.close()
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (well under 50 s)")
    opts = parser.parse_args()
    rounds = 40 if opts.quick else 200
    result: dict[str, Any] = {"bench": NAME}
    # 5000 first, so its memory figure is its caches and not leftovers of an earlier build
    result.update(bench_size(5000, rounds, memory=True))
    result.update(bench_size(1000, rounds))
    p99, floor = result["filter_p99_ms_5000"], result["filter_floor_p99_ms_5000"]
    result["target_p99_ms"] = 50.0
    result["goal_p99_ms"] = 10.0
    result["ratio"] = round(p99 / floor, 2) if floor else None
    print(json.dumps(result))


if __name__ == "__main__":
    main()
