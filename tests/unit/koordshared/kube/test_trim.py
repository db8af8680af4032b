"""The cluster processes' trims (``koordshared.kube.trim``): what a cached pod or node keeps, and the sharing
of what pods of one template (nodes of one pool) have alike: one object for equal values, each pod's own
fields its own, nothing shared between values that differ, and a shared value dropped once no cached object
holds it."""

from __future__ import annotations

import copy
import gc
import json
from typing import Any

from koordshared.kube import trim
from koordshared.kube.trim import share, slim_node, slim_pod
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
    key = json.dumps(p["metadata"]["labels"], separators=(",", ":"))
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
