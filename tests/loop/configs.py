"""What the loop configures: the slo-controller-config, koord-scheduler's configuration, the descheduler's
configuration, and the pods (one node's load, the replacements a ReplicaSet would make).

Timescales are shortened (agents report every 2 s, rounds every 2 s, an abnormal node after 3 rounds
over its threshold, a 10 s window per workload) so the whole story takes about a minute; thresholds are
Koordinator's fields with values fitted to a 2-core node.
"""

from __future__ import annotations

import json
import math
from typing import Any

NS = "koordinator-system"
CPU = "2"
MEMORY = "4Gi"
BUSY = "koordlet.test/busy-cpu"
WORKLOAD = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "name": "be-jobs",
    "uid": "rs-be-jobs",
    "controller": True,
}
SCHEDULER = "koord-scheduler"
"""The schedulerName of the pods the loop leaves to koord-scheduler (the probe and the replacements)."""
SCHEDULER_CPU_PERCENT = 40
LOW_CPU_PERCENT = 20


def slo_controller_config() -> dict[str, Any]:
    colocation = {"enable": True, "metricReportIntervalSeconds": 2, "metricAggregateDurationSeconds": 60}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "slo-controller-config", "namespace": NS},
        "data": {"colocation-config": json.dumps(colocation)},
    }


def thresholds(hot: float, cold: float, per_pod: float) -> tuple[int, int, int]:
    """``(low, high, scheduler)`` cpu percents for what this machine let the loop's pods burn (``hot``:
    the hot node's reported %, ``cold``: the busiest cold node's, ``per_pod``: one BE job's).

    The descheduler's high threshold is a pod and a half under the hot node (two evictions bring it
    under), its low one under that and over the cold nodes (LOW_CPU_PERCENT when there is room);
    LoadAwareScheduling's filter keeps new pods off the hot node but takes a cold node with two
    replacements more (SCHEDULER_CPU_PERCENT when there is room). On a quiet machine these are the
    configured values; on a busy one, where each busy loop burns less, they follow what was measured.
    """
    high = math.floor(hot - 1.5 * per_pod)
    low = max(min(LOW_CPU_PERCENT, high - 3), math.ceil(cold) + 1)
    high = max(high, low + 3)
    room = math.ceil(cold + 2 * per_pod) + 1
    scheduler = min(SCHEDULER_CPU_PERCENT, math.floor(hot) - 1)
    if scheduler <= room:
        scheduler = math.floor((room + hot) / 2)
    return low, high, scheduler


def scheduler_config(cpu_percent: int = SCHEDULER_CPU_PERCENT) -> dict[str, Any]:
    """koord-scheduler's profile: kube-scheduler's default plugins plus LoadAwareScheduling, filtering on
    the p95 of the last 5 minutes (reacts within seconds of a node turning hot) and scoring on the current
    usage. Leader election on the Lease koordinator-system/koord-scheduler, as deployed."""
    thresholds = {"cpu": cpu_percent, "memory": 95}
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"resourceName": SCHEDULER, "resourceNamespace": NS},
        "profiles": [
            {
                "schedulerName": SCHEDULER,
                "plugins": {"multiPoint": {"enabled": [{"name": "LoadAwareScheduling", "weight": 1}]}},
                "pluginConfig": [
                    {
                        "name": "LoadAwareScheduling",
                        "args": {
                            "usageThresholds": thresholds,
                            "aggregated": {
                                "usageThresholds": thresholds,
                                "usageAggregationType": "p95",
                                "usageAggregatedDuration": "5m",
                            },
                        },
                    }
                ],
            }
        ],
    }


def descheduler_config(low_cpu_percent: int, high_cpu_percent: int, *, dry_run: bool) -> dict[str, Any]:
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerConfiguration",
        "deschedulingInterval": "2s",
        "dryRun": dry_run,
        "leaderElection": {"resourceName": "koord-descheduler", "resourceNamespace": NS},
        "profiles": [
            {
                "name": "koord-descheduler",
                "plugins": {"balance": {"enabled": [{"name": "LowNodeLoad"}]}},
                "pluginConfig": [
                    {
                        "name": "LowNodeLoad",
                        "args": {
                            "lowThresholds": {"cpu": low_cpu_percent, "memory": 100},
                            "highThresholds": {"cpu": high_cpu_percent, "memory": 100},
                            "anomalyCondition": {"consecutiveAbnormalities": 2},
                            "evictableNamespaces": {"exclude": ["kube-system", NS]},
                        },
                    },
                    {
                        "name": "MigrationController",
                        "args": {
                            "evictionPolicy": "Eviction",
                            "objectLimiters": {"workload": {"duration": "10s"}},
                        },
                    },
                ],
            }
        ],
    }


def pod(
    name: str,
    *,
    busy: str,
    node: str = "",
    priority_class: str,
    qos: str,
    priority_class_name: str = "",
    requests: dict[str, str] | None = None,
    owned: bool = False,
    gate: str = "",
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "labels": {"koordinator.sh/priority-class": priority_class, "koordinator.sh/qosClass": qos},
        "annotations": {BUSY: busy},
    }
    if owned:
        meta["ownerReferences"] = [WORKLOAD]
    container: dict[str, Any] = {"name": "main", "image": "busy-loop"}
    if requests:
        container["resources"] = {"requests": requests}
    spec: dict[str, Any] = {"containers": [container], "schedulerName": SCHEDULER}
    if node:
        spec["nodeName"] = node
    if gate:
        spec["schedulingGates"] = [{"name": gate}]
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def hot_pods(node: str, busy: str) -> list[dict[str, Any]]:
    """The hot node's load: one LS prod service and four BE jobs of one ReplicaSet, each burning ``busy``.
    Koordinator's order evicts the free-class job first, then the batch jobs by rising priority; the prod
    service never goes before them."""
    return [
        pod("ls-web", busy=busy, node=node, priority_class="koord-prod", qos="LS", requests={"cpu": "100m"}),
        pod("be-free", busy=busy, node=node, priority_class="koord-free", qos="BE", owned=True),
        *(
            pod(
                f"be-batch-{i}",
                busy=busy,
                node=node,
                priority_class="koord-batch",
                qos="BE",
                priority_class_name=f"koord-batch-{5000 + 100 * i}",
                owned=True,
            )
            for i in (1, 2, 3)
        ),
    ]


def priority_classes() -> list[dict[str, Any]]:
    """The batch jobs' PriorityClasses: the API server's priority admission turns their names into
    ``spec.priority`` (in Koordinator's batch band, 5000-5999)."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": f"koord-batch-{v}"},
            "value": v,
        }
        for v in (5100, 5200, 5300)
    ]


EVICTION_ORDER = ["default/be-free", "default/be-batch-1", "default/be-batch-2", "default/be-batch-3"]
