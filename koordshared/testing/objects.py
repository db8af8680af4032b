"""Builders for cluster objects as the API server stores them (plain JSON dicts): nodes, pods, NodeMetrics,
ElasticQuotas.

For scheduler and descheduler plugin authors' tests (and the project's own tests, simulations and
benchmarks); independent of pytest.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from koordshared.apis.extension import elasticquota as eq
from koordshared.apis.meta import groups
from koordshared.apis.meta.quantity import format_bytes, format_milli, format_time

GiB = 2**30
MiB = 2**20


def node(
    name: str,
    cpu: str = "16",
    memory: str = "64Gi",
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    pods: str = "110",
    kubelet_port: int | None = None,
) -> dict[str, Any]:
    """A ready Node; with ``kubelet_port``, a kubelet on loopback at that port (as an agent finds it)."""
    status: dict[str, Any] = {
        "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
        "capacity": {"cpu": cpu, "memory": memory, "pods": pods},
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    if kubelet_port is not None:
        status["addresses"] = [{"type": "InternalIP", "address": "127.0.0.1"}]
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": kubelet_port}}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})},
        "spec": {},
        "status": status,
    }


def pod(
    name: str,
    *,
    namespace: str = "default",
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    node_name: str = "",
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    priority: int | None = None,
    owner_kind: str | None = None,
    phase: str | None = None,
    scheduled_at: float | None = None,
    initialized_at: float | None = None,
    scheduler_name: str = "default-scheduler",
) -> dict[str, Any]:
    """A one-container pod; ``scheduled_at`` adds a ``PodScheduled=True`` condition with that time."""
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits:
        resources["limits"] = dict(limits)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or str(uuid.uuid4()),
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
    }
    if owner_kind:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner_kind, "name": "owner", "uid": "o"}]
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "containers": [{"name": "main", "image": "busybox", "resources": resources}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    status: dict[str, Any] = {"phase": phase or "Pending"}
    conditions = []
    if scheduled_at is not None:
        conditions.append(
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": format_time(scheduled_at)}
        )
    if initialized_at is not None:
        conditions.append(
            {"type": "Initialized", "status": "True", "lastTransitionTime": format_time(initialized_at)}
        )
    if conditions:
        status["conditions"] = conditions
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def usage(cpu_milli: int, memory_bytes: int) -> dict[str, Any]:
    return {"resources": {"cpu": format_milli(cpu_milli), "memory": format_bytes(memory_bytes)}}


def node_metric(
    name: str,
    *,
    update_time: float | None,
    cpu_milli: int = 0,
    memory_bytes: int = 0,
    pods: Iterable[tuple[str, str, int, int, str]] = (),
    aggregated: Mapping[tuple[str, str], tuple[int, int]] | None = None,
    system: tuple[int, int] | None = None,
    report_interval: int | None = None,
    with_node_metric: bool = True,
) -> dict[str, Any]:
    """A NodeMetric; ``pods`` are ``(namespace, name, cpu_milli, memory_bytes, priority)``, ``aggregated``
    maps ``(type, duration)`` such as ``("p95", "5m0s")`` to ``(cpu_milli, memory_bytes)``."""
    status: dict[str, Any] = {}
    if update_time is not None:
        status["updateTime"] = format_time(update_time)
    if with_node_metric:
        nm: dict[str, Any] = {"nodeUsage": usage(cpu_milli, memory_bytes)}
        if system is not None:
            nm["systemUsage"] = usage(*system)
        if aggregated:
            by_duration: dict[str, dict[str, Any]] = {}
            for (typ, duration), (c, m) in aggregated.items():
                by_duration.setdefault(duration, {})[typ] = usage(c, m)
            nm["aggregatedNodeUsages"] = [{"duration": d, "usage": u} for d, u in by_duration.items()]
        status["nodeMetric"] = nm
    status["podsMetric"] = [
        {"namespace": ns, "name": n, "podUsage": usage(c, m), "priority": prio, "qos": "LS"}
        for ns, n, c, m, prio in pods
    ]
    spec: dict[str, Any] = {}
    if report_interval is not None:
        spec = {"metricCollectPolicy": {"reportIntervalSeconds": report_interval}}
    return {
        "apiVersion": groups.NODE_METRICS.api_version,
        "kind": groups.NODE_METRICS.kind,
        "metadata": {"name": name},
        "spec": spec,
        "status": status,
    }


def elastic_quota(
    name: str,
    *,
    namespace: str = "default",
    minimum: Mapping[str, str] | None = None,
    maximum: Mapping[str, str] | None = None,
    parent: str = "",
    is_parent: bool = False,
    lends: bool = True,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An ElasticQuota (``scheduling.sigs.k8s.io/v1alpha1``): ``spec.min``/``spec.max`` from ``minimum``
    and ``maximum``, Koordinator's tree labels set as asked."""
    all_labels = dict(labels or {})
    if parent:
        all_labels[eq.LABEL_PARENT] = parent
    if is_parent:
        all_labels[eq.LABEL_IS_PARENT] = "true"
    if not lends:
        all_labels[eq.LABEL_ALLOW_LENT_RESOURCE] = "false"
    spec: dict[str, Any] = {}
    if minimum:
        spec["min"] = dict(minimum)
    if maximum:
        spec["max"] = dict(maximum)
    return {
        "apiVersion": groups.ELASTIC_QUOTAS.api_version,
        "kind": groups.ELASTIC_QUOTAS.kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": all_labels,
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
    }
