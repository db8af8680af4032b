"""The tier's workloads as Koordinator's colocation docs write them (LS Deployments, BE pods on batch
resources scheduled by koord-scheduler), and what the tests read back: objects as JSON, a pod's real
cgroup directories, the NodeMetric, the Node's batch resources."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.realcluster.cluster import Cluster
from tests.realcluster.images import BUSYBOX
from tests.realcluster.procs import wait_until

NS = "default"
CGROUP_ROOT = Path("/sys/fs/cgroup")
BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEMORY = "kubernetes.io/batch-memory"
BURN = "while :; do :; done"
IDLE = "trap 'exit 0' TERM; while :; do sleep 1; done"


def container(command: str, resources: dict[str, Any] | None = None, name: str = "main") -> dict[str, Any]:
    c: dict[str, Any] = {
        "name": name,
        "image": BUSYBOX,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", command],
    }
    if resources:
        c["resources"] = resources
    return c


def ls_deployment(
    name: str, command: str, *, cpu: str = "100m", memory: str = "32Mi", replicas: int = 1
) -> dict[str, Any]:
    """An LS workload as a plain Deployment: kube-scheduler places it, its pods are Burstable."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, "koordinator.sh/qosClass": "LS"}},
                "spec": {
                    "priorityClassName": "koord-prod",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        container(
                            command,
                            {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": "128Mi"}},
                        )
                    ],
                },
            },
        },
    }


def be_pod(name: str, command: str, *, batch_cpu: int = 500, batch_memory: str = "128Mi") -> dict[str, Any]:
    """A BE pod as Koordinator's docs write one: the BE QoS label, the koord-batch priority, batch
    resources (milli-cores as an integer) and koord-scheduler."""
    res = {BATCH_CPU: str(batch_cpu), BATCH_MEMORY: batch_memory}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"koordinator.sh/qosClass": "BE", "app": name}},
        "spec": {
            "schedulerName": "koord-scheduler",
            "priorityClassName": "koord-batch",
            "terminationGracePeriodSeconds": 1,
            "restartPolicy": "Always",
            "containers": [container(command, {"requests": res, "limits": res})],
        },
    }


def apply(cluster: Cluster, *objs: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(objs))


def get(cluster: Cluster, kind: str, name: str, ns: str | None = NS) -> dict[str, Any]:
    args = ["get", kind, name, "-o", "json"]
    if ns:
        args += ["-n", ns]
    doc: dict[str, Any] = json.loads(cluster.kubectl(*args))
    return doc


def pods(cluster: Cluster, selector: str, ns: str = NS) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(
        cluster.kubectl("get", "pods", "-n", ns, "-l", selector, "-o", "json")
    )["items"]
    return items


def running(pod: dict[str, Any]) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return (
        pod.get("status", {}).get("phase") == "Running"
        and bool(statuses)
        and all("running" in s.get("state", {}) for s in statuses)
        and "deletionTimestamp" not in pod["metadata"]
    )


def wait_running(
    cluster: Cluster, selector: str, count: int = 1, timeout: float = 90
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    seen: list[dict[str, Any]] = []

    def ready() -> bool:
        seen[:] = pods(cluster, selector)
        found[:] = [p for p in seen if running(p)]
        return len(found) >= count

    try:
        wait_until(f"{count} running pod(s) {selector}", ready, timeout)
    except TimeoutError as e:
        raise TimeoutError(f"{e}; the pods last seen: {[pod_state(p) for p in seen] or 'none'}") from None
    return found


def pod_state(pod: dict[str, Any]) -> str:
    """A pod's name, phase, reason and each container's state, as a timed-out wait reports them."""
    status = pod.get("status", {})
    states = [f"{c.get('name')}={c.get('state')}" for c in status.get("containerStatuses") or []]
    deleting = " (deleting)" if "deletionTimestamp" in pod.get("metadata", {}) else ""
    return (
        f"{pod['metadata']['name']}{deleting}: {status.get('phase')} {status.get('reason', '')} "
        f"{status.get('message', '')} {states} conditions={status.get('conditions')}"
    )


def delete(cluster: Cluster, kind: str, *names: str, ns: str = NS) -> None:
    cluster.kubectl("delete", kind, *names, "-n", ns, "--ignore-not-found", "--wait=true", "--timeout=60s")


def pod_cgroup(pod: dict[str, Any], controller: str = "cpu") -> Path:
    """The kubelet's cgroupfs directory of the pod (``kubepods[/<qos tier>]/pod<uid>``)."""
    tier = {"Guaranteed": "", "Burstable": "burstable", "BestEffort": "besteffort"}[pod["status"]["qosClass"]]
    parts = ["kubepods", *([tier] if tier else []), f"pod{pod['metadata']['uid']}"]
    return CGROUP_ROOT.joinpath(controller, *parts)


def container_cgroup(pod: dict[str, Any], controller: str = "cpu", index: int = 0) -> Path:
    cid = pod["status"]["containerStatuses"][index]["containerID"].split("://", 1)[1]
    return pod_cgroup(pod, controller) / cid


def node_metric(cluster: Cluster) -> dict[str, Any]:
    return get(cluster, "nodemetric", cluster.node_name, ns=None)


def batch_allocatable(cluster: Cluster) -> tuple[int, int]:
    """The Node's ``batch-cpu`` (milli-cores) and ``batch-memory`` (bytes) allocatable; 0 when absent."""
    from koordshared.apis.meta.quantity import parse_quantity

    alloc = get(cluster, "node", cluster.node_name, ns=None)["status"].get("allocatable", {})
    return int(parse_quantity(alloc.get(BATCH_CPU, "0"))), int(parse_quantity(alloc.get(BATCH_MEMORY, "0")))


def pod_usage(metric: dict[str, Any], name: str, ns: str = NS) -> dict[str, Any] | None:
    for entry in metric.get("status", {}).get("podsMetric") or []:
        if entry.get("name") == name and entry.get("namespace") == ns:
            usage: dict[str, Any] = entry.get("podUsage", {}).get("resources", {})
            return usage
    return None


COLOCATION = {
    "enable": True,
    # Seconds instead of minutes, so a story takes one; the formulas are the shipped ones.
    "metricReportIntervalSeconds": 2,
    "metricAggregateDurationSeconds": 30,
    "metricMemoryCollectPolicy": "usageWithoutPageCache",
    # The whole node is reclaimable: on two CPUs the shipped 60 % leaves little to show a fall in.
    "cpuReclaimThresholdPercent": 100,
    "cpuCalculatePolicy": "usage",
    "memoryReclaimThresholdPercent": 65,
    "memoryCalculatePolicy": "usage",
    "updateTimeThresholdSeconds": 5,
    "resourceDiffThreshold": 0.05,
}
"""The tier's colocation-config: the shipped keys, with a fast cadence and the whole node reclaimable."""


@contextlib.contextmanager
def slo_config(cluster: Cluster, **keys: Mapping[str, Any]) -> Iterator[None]:
    """The slo-controller-config ConfigMap with ``keys`` (``colocation_config=...`` for
    ``colocation-config``) for the duration; what it held before is put back after."""
    cm = get(cluster, "configmap", "slo-controller-config", ns="koordinator-system")
    before = dict(cm["data"])
    data = {k.replace("_", "-"): json.dumps(v) for k, v in keys.items()}

    def patch(values: Mapping[str, str]) -> None:
        body = json.dumps({"data": dict(values)})
        cluster.kubectl(
            "patch",
            "configmap",
            "slo-controller-config",
            "-n",
            "koordinator-system",
            "--type=merge",
            "-p",
            body,
        )

    patch(data)
    try:
        yield
    finally:
        patch({k: before[k] for k in data if k in before})


def node_cpu_milli(cluster: Cluster) -> int:
    """The node's CPU usage in its latest NodeMetric report, in milli-cores."""
    from koordshared.apis.meta.quantity import parse_quantity

    used = node_metric(cluster)["status"]["nodeMetric"]["nodeUsage"]["resources"]["cpu"]
    return int(float(parse_quantity(used)) * 1000)


def node_cpu_percent(cluster: Cluster) -> float:
    """The node's CPU usage in its latest NodeMetric report, as a percent of its capacity."""
    from koordshared.apis.meta.quantity import parse_quantity

    capacity = get(cluster, "node", cluster.node_name, ns=None)["status"]["capacity"]["cpu"]
    return node_cpu_milli(cluster) / 10 / float(parse_quantity(capacity))


def wait_for_room(
    cluster: Cluster,
    *,
    batch_cpu: int = 0,
    batch_memory: int = 0,
    cpu_percent: float = 100,
    timeout: float = 180,
) -> None:
    """Wait until the node has ``batch_cpu`` milli-cores of batch-cpu and ``batch_memory`` bytes of
    batch-memory and reports CPU use under ``cpu_percent``: what the node can give BE is what the rest of
    this machine leaves, and a test of how it is given needs some. Fails saying the machine is too busy
    when it never comes."""

    def room() -> bool:
        cpu, memory = batch_allocatable(cluster)
        return cpu >= batch_cpu and memory >= batch_memory and node_cpu_percent(cluster) < cpu_percent

    wait_until(
        f"room on the node (batch-cpu >= {batch_cpu}m, batch-memory >= {batch_memory >> 20} MiB, "
        f"CPU < {cpu_percent:.0f} %: is the machine too busy?)",
        room,
        timeout,
    )
