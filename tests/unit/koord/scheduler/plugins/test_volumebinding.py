"""VolumeBinding (limited) in koord-scheduler's default profile: claims looked up, kube-scheduler's reasons
for claims it cannot use, clear refusals of what koord-scheduler does not do (binding or provisioning
volumes, DRA), bound volumes' node affinity, and a claim bound later requeuing the pod."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from koord.scheduler.framework import CycleState, PreFilterResult
from koordshared.kube.trim import slim_pod
from tests.support.scheduler.memcluster import MemCluster, wait_for

IMMEDIATE = "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."
NOT_HELPFUL = " preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."


@pytest.fixture
def c() -> Iterator[MemCluster]:
    cluster = MemCluster()
    cluster.node("n1", labels={"zone": "a", "kubernetes.io/hostname": "n1"})
    cluster.node("n2", labels={"zone": "b", "kubernetes.io/hostname": "n2"})
    yield cluster
    cluster.close()


def pvc(
    name: str,
    *,
    volume: str = "",
    completed: bool | None = None,
    storage_class: str | None = None,
    phase: str = "Bound",
    **meta: Any,
) -> dict[str, Any]:
    annotations = (
        {"pv.kubernetes.io/bind-completed": "yes"} if (completed if completed is not None else volume) else {}
    )
    spec: dict[str, Any] = {"volumeName": volume} if volume else {}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations, **meta},
        "spec": spec,
        "status": {"phase": phase if volume else "Pending"},
    }


def pv(name: str, required: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}}
    if required is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": required}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def storage_class(name: str, mode: str | None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
    }
    if mode is not None:
        obj["volumeBindingMode"] = mode
    return obj


def in_zone(zone: str) -> list[dict[str, Any]]:
    return [{"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}]


def claim_volume(claim: str) -> dict[str, Any]:
    return {"name": "data", "persistentVolumeClaim": {"claimName": claim}}


def schedule_pod(
    c: MemCluster, name: str = "p", volumes: list[dict[str, Any]] | None = None, **kw: Any
) -> str:
    """Schedule one pod; its node, or its FailedScheduling message."""
    c.pod(name, "1", spec={"volumes": volumes or [claim_volume("data")], **kw.pop("spec", {})}, **kw)
    c.schedule()

    def outcome() -> str:
        node = c.node_of(name)
        messages = [m for obj, m in c.events("FailedScheduling") if obj == f"default/{name}"]
        return node or (messages[-1] if messages else "")

    return str(wait_for(outcome))


def test_pods_without_claims_are_not_its_business(c: MemCluster) -> None:
    assert schedule_pod(c, volumes=[{"name": "scratch", "emptyDir": {}}]) in ("n1", "n2")


@pytest.mark.parametrize(
    ("claim", "message"),
    [
        (None, 'persistentvolumeclaim "data" not found'),
        (
            pvc("data", volume="v", phase="Lost"),
            'persistentvolumeclaim "data" bound to non-existent persistentvolume "v"',
        ),
        (
            pvc("data", volume="v", deletionTimestamp="2026-01-01T00:00:00Z"),
            'persistentvolumeclaim "data" is being deleted',
        ),
        (pvc("data"), "pod has unbound immediate PersistentVolumeClaims"),
        (pvc("data", storage_class="missing"), "pod has unbound immediate PersistentVolumeClaims"),
        (pvc("data", storage_class="fast"), "pod has unbound immediate PersistentVolumeClaims"),
        # pre-bound to a volume but not yet confirmed by the PersistentVolume controller
        (pvc("data", volume="v", completed=False), "pod has unbound immediate PersistentVolumeClaims"),
        (
            pvc("data", storage_class="local"),
            "pod has unbound PersistentVolumeClaims with volumeBindingMode WaitForFirstConsumer: "
            "koord-scheduler does not bind or provision volumes (schedule the pod with kube-scheduler)",
        ),
    ],
)
def test_claims_it_cannot_use_fail_the_pod_on_every_node(c: MemCluster, claim: Any, message: str) -> None:
    c.informers["storageclasses"].put(storage_class("fast", "Immediate"))
    c.informers["storageclasses"].put(storage_class("local", "WaitForFirstConsumer"))
    if claim is not None:
        c.informers["persistentvolumeclaims"].put(claim)
    got = schedule_pod(c)
    assert got.startswith(f"0/2 nodes are available: {message}")
    assert got.endswith(NOT_HELPFUL)


def test_unbound_immediate_claim_message_is_kube_schedulers(c: MemCluster) -> None:
    c.informers["persistentvolumeclaims"].put(pvc("data"))
    assert schedule_pod(c) == IMMEDIATE + NOT_HELPFUL


def test_a_storage_class_without_binding_mode_is_an_error(c: MemCluster) -> None:
    c.informers["storageclasses"].put(storage_class("odd", None))
    c.informers["persistentvolumeclaims"].put(pvc("data", storage_class="odd"))
    assert 'VolumeBindingMode not set for StorageClass "odd"' in schedule_pod(c)


def test_dra_claims_are_refused_clearly(c: MemCluster) -> None:
    claims = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    got = schedule_pod(c, volumes=[{"name": "x", "emptyDir": {}}], spec={"resourceClaims": claims})
    assert "dynamic resource allocation (spec.resourceClaims), which koord-scheduler does not support" in got


def test_bound_volume_node_affinity_picks_the_node(c: MemCluster) -> None:
    c.informers["persistentvolumeclaims"].put(pvc("data", volume="v"))
    c.informers["persistentvolumes"].put(pv("v", in_zone("b")))
    assert schedule_pod(c) == "n2"


def test_bound_volume_node_affinity_conflict(c: MemCluster) -> None:
    c.informers["persistentvolumeclaims"].put(pvc("data", volume="v"))
    c.informers["persistentvolumes"].put(pv("v", in_zone("c")))
    assert schedule_pod(c) == (
        "0/2 nodes are available: 2 node(s) didn't match PersistentVolume's node affinity." + NOT_HELPFUL
    )


def test_bound_to_a_missing_volume(c: MemCluster) -> None:
    c.informers["persistentvolumeclaims"].put(pvc("data", volume="gone"))
    assert schedule_pod(c).startswith(
        "0/2 nodes are available: "
        "2 node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)."
    )


def test_volume_without_required_affinity_fits_anywhere(c: MemCluster) -> None:
    c.informers["persistentvolumeclaims"].put(pvc("data", volume="v"))
    c.informers["persistentvolumes"].put(pv("v"))
    assert schedule_pod(c) in ("n1", "n2")


def test_local_volume_pinned_to_a_host_narrows_the_search(c: MemCluster) -> None:
    host = [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]
    c.informers["persistentvolumeclaims"].put(pvc("data", volume="v"))
    c.informers["persistentvolumes"].put(pv("v", host))
    plugin = c.plugin("VolumeBinding")
    result = plugin.pre_filter(CycleState(), c.pod("probe", "1", spec={"volumes": [claim_volume("data")]}))
    assert result == PreFilterResult(frozenset({"n1"}))
    assert schedule_pod(c) == "n1"


def test_ephemeral_volume_claims(c: MemCluster) -> None:
    volume = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    got = schedule_pod(c, "e", volumes=volume)
    assert 'waiting for ephemeral volume controller to create the persistentvolumeclaim "e-scratch"' in got
    c.informers["persistentvolumeclaims"].put(pvc("e-scratch", volume="v"))
    c.informers["persistentvolumes"].put(pv("v", in_zone("a")))
    c.scheduler.queue.activate([c.stored("e")["metadata"]["uid"]])
    c.schedule()
    got = wait_for(lambda: [m for obj, m in c.events("FailedScheduling") if obj == "default/e"][1:])[-1]
    assert "PVC default/e-scratch was not created for pod default/e (pod is not owner)" in got
    uid = c.stored("e")["metadata"]["uid"]
    owner = [{"apiVersion": "v1", "kind": "Pod", "name": "e", "uid": uid, "controller": True}]
    c.informers["persistentvolumeclaims"].put(pvc("e-scratch", volume="v", ownerReferences=owner))
    c.schedule()
    assert wait_for(lambda: c.node_of("e")) == "n1"


def test_a_claim_bound_later_requeues_the_pod(c: MemCluster) -> None:
    claims = c.informers["persistentvolumeclaims"]
    claims.put(pvc("data"))
    c.informers["persistentvolumeclaims"].put(pvc("unrelated"))
    assert schedule_pod(c) == IMMEDIATE + NOT_HELPFUL
    uid = c.stored("p")["metadata"]["uid"]
    assert c.scheduler.queue.where(uid) == "unschedulable"
    claims.put(pvc("unrelated", volume="w"))  # another pod's claim: the hint skips it
    assert c.scheduler.queue.where(uid) == "unschedulable"
    c.informers["persistentvolumes"].put(pv("v", in_zone("a")))  # a volume appears: may help
    assert c.scheduler.queue.where(uid) in ("backoff", "active")
    c.schedule()
    assert c.scheduler.queue.where(uid) == "unschedulable"
    claims.put(pvc("data", volume="v"))  # the PersistentVolume controller binds the claim
    assert c.scheduler.queue.where(uid) in ("backoff", "active")
    c.schedule()
    assert wait_for(lambda: c.node_of("p")) == "n1"


def test_the_pod_cache_keeps_claim_names() -> None:
    pod = {
        "metadata": {"name": "p"},
        "spec": {
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data", "readOnly": True}},
                {"name": "cfg", "configMap": {"name": "big", "items": [{"key": "a", "path": "b"}]}},
            ]
        },
    }
    assert slim_pod(pod, keep_volume_kinds=True)["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "cfg", "configMap": {}},
    ]
    assert "volumes" not in slim_pod(pod)["spec"]
