"""A large cluster built in memory for the cluster-side benchmarks: nodes, bound pods and NodeMetrics of
realistic size, decoded each from its own JSON as a watch event delivers them (no key shared with
another object until the informer's trim shares it).

Nodes (``node-00000``...) have 32 cores and 128 GiB, labels, annotations, ``managedFields``, four
conditions and thirty images. Each node carries ``pods_per_node`` Burstable pods of twenty workloads
(labels, annotations, an owner, ``managedFields``, env, probes, volumes; 500m/1Gi requested, 1/2Gi
limits) scheduled an hour ago. Its NodeMetric (reported ten seconds before ``now``) gives the node's
usage, three aggregation windows and every pod's usage; a quarter of the nodes use 75 % of their cpu,
the others 10-60 %.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from koordshared.apis.meta.quantity import format_time

PODS_PER_NODE = 20
GiB = 2**30


def node_name(i: int) -> str:
    return f"node-{i:05d}"


def make_node(i: int) -> dict[str, Any]:
    name = node_name(i)
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


def make_metric(node: str, cpu: int, now: float, pods_per_node: int = PODS_PER_NODE) -> dict[str, Any]:
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
                for j in range(pods_per_node)
            ],
        },
    }


def as_watched(obj: dict[str, Any]) -> Any:
    """The object as a watch event delivers it: decoded from its own JSON (no key shared with others)."""
    return json.loads(json.dumps(obj))


def node_cpu_used(i: int) -> int:
    """Millicores the ``i``-th node reports: a quarter over 65 % of 32 cores, the rest 10 % to 60 %."""
    return 24000 if i % 4 == 0 else 3200 + (i * 7919) % 16000


def cluster(
    nodes: int, now: float, pods_per_node: int = PODS_PER_NODE
) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]]:
    """Per node, as watched: the Node, its bound pods and its NodeMetric (built one node at a time, so
    the untrimmed objects of the whole cluster are never all alive at once)."""
    for i in range(nodes):
        node = make_node(i)
        name = node["metadata"]["name"]
        pods = [as_watched(make_pod(name, j, now)) for j in range(pods_per_node)]
        yield as_watched(node), pods, as_watched(make_metric(name, node_cpu_used(i), now, pods_per_node))


def incoming_pod(now: float) -> dict[str, Any]:
    """A pending Burstable pod of the same shape, as kube-scheduler sends it."""
    pod = make_pod("", 99, now)
    pod["metadata"].update(name="incoming", namespace="default", uid="incoming-uid")
    pod["spec"].pop("nodeName")
    pod["status"] = {}
    return pod
