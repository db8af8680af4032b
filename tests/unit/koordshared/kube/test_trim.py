"""The cluster processes' trims (``koordshared.kube.trim``): what a cached pod or node keeps, and the sharing
of what pods of one template (nodes of one pool) have alike: one object for equal values, each pod's own
fields its own, nothing shared between values that differ, and a shared value dropped once no cached object
holds it."""

from __future__ import annotations

import copy
import gc
import json
import sys
from typing import Any

import pytest

from koordshared.kube import trim
from koordshared.kube.trim import LAST_APPLIED, share, slim_node, slim_pod
from koordshared.testing.objects import node, pod


def replica(name: str, node_name: str) -> dict[str, Any]:
    p = pod(
        name,
        node_name=node_name,
        requests={"cpu": "500m", "memory": "1Gi"},
        labels={"app": "web", "pod-template-hash": "5d8f"},
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "a"},
        owner_kind="ReplicaSet",
        scheduled_at=1_700_000_000.0,
    )
    p["metadata"]["managedFields"] = [{"manager": "kube-controller-manager"}]
    p["spec"]["tolerations"] = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]
    p["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    p["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    p["status"]["podIP"] = "10.0.0.1"
    return json.loads(json.dumps(p))  # as a watch event decodes it: nothing shared yet


def test_slim_pod_keeps_what_the_plugins_read() -> None:
    raw = replica("web-1", "n1")
    before = copy.deepcopy(raw)
    p = slim_pod(raw)
    assert raw == before  # the input is left as it was
    assert "managedFields" not in p["metadata"]
    assert p["metadata"]["annotations"] == {"team": "a"}
    assert "volumes" not in p["spec"] and "env" not in p["spec"]["containers"][0]
    assert p["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"}}
    assert "podIP" not in p["status"] and p["status"]["conditions"] == raw["status"]["conditions"]
    assert p["metadata"]["uid"] == raw["metadata"]["uid"]
    assert slim_pod(raw, keep_volume_kinds=True)["spec"]["volumes"] == [{"name": "data", "emptyDir": {}}]
    assert json.loads(json.dumps(p)) == p  # still plain JSON


def test_replicas_share_their_template_and_keep_their_own_fields() -> None:
    a, b = slim_pod(replica("web-1", "n1")), slim_pod(replica("web-2", "n2"))
    for key in ("containers", "tolerations"):
        assert a["spec"][key] is b["spec"][key]
    for key in ("labels", "annotations", "ownerReferences"):
        assert a["metadata"][key] is b["metadata"][key]
    assert a["metadata"] is not b["metadata"] and a["spec"] is not b["spec"]
    assert (a["spec"]["nodeName"], b["spec"]["nodeName"]) == ("n1", "n2")
    assert a["status"] is not b["status"]
    other = replica("db-1", "n1")
    other["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    c = slim_pod(other)
    assert c["spec"]["containers"] is not a["spec"]["containers"]
    assert c["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "2"
    assert c["spec"]["tolerations"] is a["spec"]["tolerations"]


def test_equal_means_equal_json() -> None:
    assert share([{"n": 1}]) is share([{"n": 1}])
    assert share([{"n": 1}]) is not share([{"n": 1.0}])
    assert share([{"n": 1}]) is not share([{"n": True}])
    assert share({"a": 1, "b": 2}) == {"a": 1, "b": 2}
    assert share("text") == "text" and share({}) == {}


def test_a_shared_value_is_forgotten_with_its_last_holder() -> None:
    labels = {"app": "only-once-" + "x" * 8}
    p = slim_pod({**replica("solo", "n1"), "metadata": {"name": "solo", "labels": labels}})
    key = trim._key(p["metadata"]["labels"])
    assert key in trim._shared
    del p
    gc.collect()
    assert key not in trim._shared


def test_nodes_of_a_pool_share_their_capacity() -> None:
    a = slim_node(json.loads(json.dumps(node("a", cpu="32"))))
    b = slim_node(json.loads(json.dumps(node("b", cpu="32"))))
    c = slim_node(json.loads(json.dumps(node("c", cpu="8"))))
    assert a["status"]["allocatable"] is b["status"]["allocatable"]
    assert a["status"]["capacity"] is b["status"]["capacity"]
    assert c["status"]["allocatable"]["cpu"] == "8"
    assert a["metadata"]["name"] == "a" and b["metadata"]["name"] == "b"


def listed_pod(name: str, **extra: Any) -> dict[str, Any]:
    """A pending pod as kube-apiserver lists it (defaults, managedFields, a projected token volume)."""
    p: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": f"uid-{name}",
            "resourceVersion": "5481",
            "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web"},
            "annotations": {LAST_APPLIED: "{}", "team": "a"},
            "finalizers": ["x/y"],
            "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {
            "volumes": [
                {"name": f"kube-api-access-{name}", "projected": {"sources": [{"serviceAccountToken": {}}]}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "c", "readOnly": True}},
            ],
            "containers": [
                {
                    "name": "pause",
                    "image": "registry.k8s.io/pause:3.10.1",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
                    "volumeMounts": [{"name": "data", "mountPath": "/d"}],
                    "terminationMessagePath": "/dev/termination-log",
                }
            ],
            "initContainers": [{"name": "init", "image": "busybox", "env": [{"name": "A", "value": "1"}]}],
            "ephemeralContainers": [{"name": "debug", "image": "busybox"}],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
            "priority": 0,
            "enableServiceLinks": True,
            "overhead": None,
        },
        "status": {"phase": "Pending", "qosClass": "Burstable", "podIP": "10.0.0.1"},
    }
    p.update(extra)
    return json.loads(json.dumps(p))


def generic_pod(obj: dict[str, Any], keep_volume_kinds: bool) -> Any:
    """What the generic path built: the kept fields, then the whole object compacted."""
    out = dict(obj)
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    if LAST_APPLIED in (meta.get("annotations") or {}):
        meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k != LAST_APPLIED}
    out["metadata"] = meta
    if isinstance(obj.get("spec"), dict):
        spec = {k: v for k, v in obj["spec"].items() if k not in ("volumes", "ephemeralContainers")}
        keep = ("name", "image", "resources", "ports", "restartPolicy", "resizePolicy")
        for key in ("containers", "initContainers"):
            if key in spec:
                spec[key] = [{k: c[k] for k in keep if k in c} for c in spec[key]]
        if keep_volume_kinds and isinstance(obj["spec"].get("volumes"), list):
            spec["volumes"] = [trim._volume_kind(v) for v in obj["spec"]["volumes"]]
        out["spec"] = spec
    if isinstance(obj.get("status"), dict):
        kept = ("phase", "conditions", "qosClass", "nominatedNodeName", "startTime")
        out["status"] = {k: obj["status"][k] for k in kept if k in obj["status"]}
    return trim.compact(out)


def generic_node(obj: dict[str, Any]) -> Any:
    out = dict(obj)
    out["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    if isinstance(obj.get("status"), dict):
        out["status"] = {k: v for k, v in obj["status"].items() if k != "images"}
    return trim.compact(out)


def test_the_trims_equal_the_generic_compaction_for_every_field_kept() -> None:
    pods = [
        listed_pod("a"),
        listed_pod("b", kind="Pod", apiVersion="v1"),
        listed_pod("c", status={"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
        {"spec": {"containers": []}},  # no metadata: an empty one, as before
    ]
    for raw in pods:
        for keep in (False, True):
            got = slim_pod(raw, keep_volume_kinds=keep)
            assert got == generic_pod(raw, keep)
            assert list(got) == list(generic_pod(raw, keep))  # the keys in the same order too
    raw_node = json.loads(json.dumps(node("n", labels={"zone": "a"})))
    raw_node["metadata"]["managedFields"] = [{"manager": "m"}]
    raw_node["status"]["images"] = [{"names": ["x"]}]
    raw_node["spec"] = {"taints": [{"key": "k", "effect": "NoSchedule"}]}
    assert slim_node(raw_node) == generic_node(raw_node)
    assert slim_node(raw_node)["metadata"]["labels"]["zone"] is sys.intern("a")


def test_a_listed_pod_is_trimmed_without_a_walk_of_its_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    cached = [slim_pod(listed_pod("first"), keep_volume_kinds=True)]  # its template's fields, shared
    calls = []
    real = trim.compact

    def counted(obj: Any) -> Any:
        calls.append(type(obj).__name__)
        return real(obj)

    monkeypatch.setattr(trim, "compact", counted)
    for i in range(10):
        cached.append(slim_pod(listed_pod(f"p{i}"), keep_volume_kinds=True))
    # Walked: the pod's own volume list (its token volume's name), its finalizers and its status
    # strings; the generic path walked every field, about 40 calls a pod.
    assert len(calls) <= 15 * 10, calls
