"""What koord-scheduler's plugins write to the API server, built by their own code for the real-apiserver
round trips of ``test_deploy``: a user's Reservation, PodGroup and ElasticQuota with every spec field, then
the status patches of the Reservation, Coscheduling and ElasticQuota plugins in the order an object meets
them, and the Device (our builders') that DeviceShare reads."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from koord.scheduler.plugins.coscheduling.controller import next_status
from koord.scheduler.plugins.elasticquota.ledger import Summary, Usage
from koord.scheduler.plugins.reservation import status as rstatus
from koordlet.testing import pod_uid
from koordshared.apis.extension import elasticquota as eq
from koordshared.apis.extension.coscheduling import POD_GROUP_LABEL
from koordshared.apis.meta.groups import PODGROUPS
from koordshared.apis.scheduling.device import ANNOTATION_GPU_PARTITIONS
from koordshared.testing.devices import device, fpga, gpu, rdma
from koordshared.testing.objects import elastic_quota
from koordshared.testing.reservations import owner_labels, owner_pod, reservation
from koordshared.testing.topology import GiB

Obj = dict[str, Any]

# ---- Reservation: a user's object, then koord-scheduler's status transitions -------------------------


def reservation_object(name: str, node: str) -> Obj:
    """A Reservation with every spec field a user sets; its scheduler is none that runs, so nothing places
    it (koord-scheduler's reservation controller still serves it, as Koordinator's serves every one)."""
    r = reservation(
        name,
        {"cpu": "2", "memory": "4Gi"},
        owners=[owner_labels({"app": "web"}), owner_pod("p", "deploy-fields")],
        scheduler_name="deploy-fields-nobody",
        ttl="1h",
        allocate_once=False,
        policy="Restricted",
        taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
        node_name=node,
        host_port=8080,
        labels={"app": "deploy-fields"},
        annotations={"note": "test"},
    )
    del r["status"], r["metadata"]["uid"]  # written by the status subresource and the server
    return r


def reservation_transitions(node: str, now: float) -> list[Callable[[Obj], Obj | None]]:
    """koord-scheduler's status patches in the order a Reservation meets them: unschedulable first,
    then placed, its owners allocated, and expired."""
    return [
        lambda r: rstatus.unschedulable(r, "0/3 nodes are available: 3 Insufficient cpu.", now),
        lambda r: rstatus.available(r, node, {"cpu": 2000, "memory": 4 * GiB}, now + 1),
        lambda r: rstatus.owners(
            r, [{"namespace": "deploy-fields", "name": "p", "uid": pod_uid(9)}], {"cpu": 1500}, now + 2
        ),
        lambda r: rstatus.expired(r, now + 3),
    ]


# ---- PodGroup: a user's object, then the PodGroup controller's status walk --------------------------


def podgroup_object(name: str, namespace: str) -> Obj:
    return {
        "apiVersion": PODGROUPS.api_version,
        "kind": PODGROUPS.kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {"gang.scheduling.koordinator.sh/mode": "NonStrict"},
        },
        "spec": {
            "minMember": 2,
            "scheduleTimeoutSeconds": 300,
            "minResources": {"cpu": "2", "memory": "1Gi"},
        },
    }


def _member(pg: Mapping[str, Any], i: int, node: str, phase: str) -> Obj:
    meta = pg["metadata"]
    return {
        "metadata": {
            "name": f"{meta['name']}-{i}",
            "namespace": meta["namespace"],
            "labels": {POD_GROUP_LABEL: meta["name"]},
            "ownerReferences": [{"kind": "Job", "name": meta["name"], "uid": pod_uid(20 + i)}],
        },
        "spec": {"nodeName": node},
        "status": {"phase": phase},
    }


def podgroup_walk(pg: Mapping[str, Any], now: float) -> Iterator[tuple[list[Mapping[str, Any]], float]]:
    """(the gang's pods, the time) at each look of the controller, walking Pending, PreScheduling,
    Scheduling, Scheduled, Running, then Failed (one member failed)."""
    looks: list[Sequence[tuple[str, str]]] = [
        [],
        [("", "Pending"), ("", "Pending")],
        [("n1", "Pending"), ("", "Pending")],
        [("n1", "Pending"), ("n1", "Pending")],
        [("n1", "Running"), ("n1", "Running")],
        [("n1", "Failed"), ("n1", "Running")],
    ]
    for i, members in enumerate(looks):
        yield [_member(pg, j, node, phase) for j, (node, phase) in enumerate(members)], now + i


def podgroup_status(pg: Obj, pods: list[Mapping[str, Any]], now: float) -> dict[str, Any]:
    """The merge patch the controller sends after one look (only what changed, as it does)."""
    old = pg.get("status") or {}
    new = next_status(pg, pods, now)
    return {"status": {k: v for k, v in new.items() if old.get(k) != v}}


# ---- ElasticQuota: a user's quota, then the plugin's figures ----------------------------------------


def quota_object(name: str, namespace: str) -> Obj:
    return elastic_quota(
        name,
        namespace=namespace,
        minimum={"cpu": "10", "memory": "20Gi"},
        maximum={"cpu": "40", "memory": "80Gi", "nvidia.com/gpu": "4"},
        parent="org",
        lends=False,
        labels={eq.LABEL_TREE_ID: "tree-1"},
        annotations={eq.ANNOTATION_SHARED_WEIGHT: '{"cpu":"1"}', eq.ANNOTATION_NAMESPACES: '["a","b"]'},
    )


def quota_summaries() -> list[Summary]:
    """The figures the plugin publishes for a quota over two syncs: every figure set, then memory and the
    GPU gone from the usage (the patch then names them null)."""
    full = {"cpu": 1500, "memory": 3 * GiB, "nvidia.com/gpu": 1}
    less = {"cpu": 2500}
    return [
        Summary(
            runtime={"cpu": 4000, "memory": 8 * GiB, "nvidia.com/gpu": 2},
            request={"cpu": 2000, "memory": 4 * GiB, "nvidia.com/gpu": 1},
            child_request={"cpu": 500, "memory": GiB},
            usage=Usage(
                request={"cpu": 2000, "memory": 4 * GiB},
                used=full,
                non_preemptible_request={"cpu": 1000},
                non_preemptible_used={"cpu": 500, "memory": GiB // 2},
            ),
        ),
        Summary(
            runtime={"cpu": 3000},
            request={"cpu": 2500},
            child_request={},
            usage=Usage(request=less, used=less, non_preemptible_request={}, non_preemptible_used={}),
        ),
    ]


# ---- Device ------------------------------------------------------------------------------------------

HEALTHY = {
    "type": "Healthy",
    "status": "True",
    "reason": "DriverReady",
    "message": "",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


def device_object(node: str) -> Obj:
    """The Device of a node with GPUs (one unhealthy, one without topology), an RDMA NIC with virtual
    functions and an FPGA, its GPU partition table and an allocation: what DeviceShare reads."""
    table = {"2": [{"minors": [0, 1], "gpuLinkType": "NVLink", "allocationScore": 1}]}
    d = device(
        node,
        {**gpu(0, labels={"model": "A100"}), "moduleID": 0, "conditions": [HEALTHY]},
        gpu(1, numa=1, pcie="pci1", healthy=False),
        gpu(2, numa=None),
        rdma(0, vfs=2, vf_labels={"type": "fast"}, labels={"vendor": "mellanox"}),
        fpga(0),
        labels={"node.koordinator.sh/gpu-model": "A100"},
        annotations={ANNOTATION_GPU_PARTITIONS: json.dumps(table)},
    )
    d["status"] = {
        "allocations": [
            {
                "type": "gpu",
                "entries": [{"name": "p", "namespace": "deploy-fields", "uuid": pod_uid(9), "minors": [0]}],
            }
        ]
    }
    return d
