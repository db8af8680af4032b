"""The extender over HTTP with kube-scheduler's own JSON shapes (``extender/v1`` Go structs, no JSON tags):
cache-capable and not, upper- and lower-case keys, error and empty answers, bind, probes, metrics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from koord.scheduler.framework import Status
from koordshared.testing.objects import pod
from tests.support.scheduler.extenderenv import ServedExtender

FILTER_KEYS = {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
BUSY = "node(s) cpu usage exceed threshold"


def go_pod(name: str = "incoming", **kw: Any) -> dict[str, Any]:
    """A pod as Go marshals a v1.Pod for the extender (no apiVersion/kind)."""
    p = pod(name, uid=f"uid-{name}", **kw)
    return {"metadata": p["metadata"], "spec": p["spec"], "status": {}}


@pytest.fixture
def ext() -> Iterator[ServedExtender]:
    e = ServedExtender()
    for name, cpu in (("idle", 1000), ("busy", 15000)):
        e.add_node(name)
        e.report(name, cpu_milli=cpu)
    e.add_node("bare")  # no NodeMetric: passes, scores 0
    yield e
    e.close()


def test_filter_cache_capable(ext: ServedExtender) -> None:
    status, res = ext.post("filter", {"Pod": go_pod(), "Nodes": None, "NodeNames": ["idle", "busy", "bare"]})
    assert status == 200
    assert set(res) == FILTER_KEYS
    assert res["NodeNames"] == ["idle", "bare"]
    assert res["Nodes"] is None
    assert res["FailedNodes"] == {"busy": BUSY}
    assert res["FailedAndUnresolvableNodes"] == {}
    assert res["Error"] == ""


def test_filter_with_node_objects(ext: ServedExtender) -> None:
    items = [ext.nodes.get(n) for n in ("idle", "busy")]
    status, res = ext.post(
        "filter", {"Pod": go_pod(), "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}
    )
    assert status == 200
    assert [n["metadata"]["name"] for n in res["Nodes"]["items"]] == ["idle"]
    assert res["Nodes"]["items"][0] == items[0]  # the node object comes back as sent
    assert res["NodeNames"] == ["idle"]
    assert res["FailedNodes"] == {"busy": BUSY}


def test_lower_case_keys_as_go_decodes_them(ext: ServedExtender) -> None:
    doc = {"pod": go_pod(), "nodes": None, "nodenames": ["idle", "busy"]}
    status, res = ext.post("filter", doc)
    assert status == 200 and res["NodeNames"] == ["idle"] and res["FailedNodes"] == {"busy": BUSY}
    status, res = ext.post("prioritize", {"POD": go_pod(), "NODENAMES": ["idle", "busy"]})
    assert status == 200 and [h["Host"] for h in res] == ["idle", "busy"]
    # an exact key wins over a case-insensitive one, as in Go
    status, res = ext.post("filter", {"Pod": go_pod(), "NodeNames": ["idle"], "nodenames": ["busy"]})
    assert res["NodeNames"] == ["idle"]


def test_empty_and_all_rejected_answers_are_lists(ext: ServedExtender) -> None:
    status, res = ext.post("filter", {"Pod": go_pod(), "Nodes": None, "NodeNames": []})
    assert status == 200 and res["NodeNames"] == [] and res["FailedNodes"] == {} and res["Error"] == ""
    status, res = ext.post("filter", {"Pod": go_pod(), "NodeNames": ["busy"]})
    assert res["NodeNames"] == [] and res["FailedNodes"] == {"busy": BUSY}
    status, res = ext.post(
        "filter", {"Pod": go_pod(), "Nodes": {"metadata": {}, "items": None}, "NodeNames": None}
    )
    assert status == 200 and res["Nodes"] == {"metadata": {}, "items": []} and res["NodeNames"] == []
    status, res = ext.post("prioritize", {"Pod": go_pod(), "Nodes": None, "NodeNames": []})
    assert status == 200 and res == []


def test_prioritize_scores_0_to_10(ext: ServedExtender) -> None:
    status, res = ext.post(
        "prioritize", {"Pod": go_pod(), "Nodes": None, "NodeNames": ["idle", "busy", "bare"]}
    )
    assert status == 200
    assert res == [
        # idle: cpu (16000-1250)*100//16000 = 92, memory 200Mi -> 99; (92+99)//2 = 95 -> 10 (9.5 rounds up)
        {"Host": "idle", "Score": 10},
        # busy: cpu (16000-15250)*100//16000 = 4; (4+99)//2 = 51 -> 5
        {"Host": "busy", "Score": 5},
        {"Host": "bare", "Score": 0},
    ]


def test_unknown_node_passes_and_scores_zero(ext: ServedExtender) -> None:
    _, res = ext.post("filter", {"Pod": go_pod(), "NodeNames": ["ghost"]})
    assert res["NodeNames"] == ["ghost"]
    _, res = ext.post("prioritize", {"Pod": go_pod(), "NodeNames": ["ghost"]})
    assert res == [{"Host": "ghost", "Score": 0}]


def test_daemonset_pod_passes_busy_node(ext: ServedExtender) -> None:
    _, res = ext.post("filter", {"Pod": go_pod("ds", owner_kind="DaemonSet"), "NodeNames": ["busy"]})
    assert res["NodeNames"] == ["busy"]


def test_malformed_requests_are_400_in_the_verb_shape(ext: ServedExtender) -> None:
    status, body = ext.raw_post("/filter", b"{not json")
    res = json.loads(body)
    assert status == 400 and set(res) == FILTER_KEYS and "not JSON" in res["Error"] and res["NodeNames"] == []
    status, res = ext.post("filter", {"NodeNames": ["idle"]})
    assert status == 400 and "Pod" in res["Error"]
    status, res = ext.post("prioritize", {"Pod": go_pod(), "NodeNames": "idle"})
    assert status == 400 and "NodeNames" in res["Error"]
    status, res = ext.post("bind", {"PodName": "p"})
    assert status == 400 and "Node" in res["Error"]
    status, _ = ext.raw_post("/preempt", b"{}")
    assert status == 404


def test_not_ready_answers_errors(ext: ServedExtender) -> None:
    ext.is_ready = False
    status, res = ext.post("filter", {"Pod": go_pod(), "NodeNames": ["idle"]})
    assert status == 200 and "not synced" in res["Error"] and res["NodeNames"] == []
    status, _ = ext.post("prioritize", {"Pod": go_pod(), "NodeNames": ["idle"]})
    assert status == 503
    assert ext.get("/readyz")[0] == 503
    ext.is_ready = True
    assert ext.get("/readyz") == (200, "ok\n")
    assert ext.get("/healthz") == (200, "ok\n")


class Boom:
    """A plugin that fails on one node, to check that a failure answers only that call."""

    name = "Boom"

    def __init__(self, args: Any, handle: Any) -> None:
        self.bad = (args or {}).get("node", "")

    def filter(self, state: Any, p: Any, node_info: Any) -> Status | None:
        if node_info.name == self.bad:
            raise RuntimeError("disk on fire")
        return None

    def score(self, state: Any, p: Any, node_info: Any) -> int:
        if node_info.name == self.bad:
            return 101
        return 50


def test_a_failing_plugin_fails_that_call_only() -> None:
    config = {
        "profiles": [
            {
                "plugins": {"multiPoint": {"enabled": [{"name": "Boom"}]}},
                "pluginConfig": [{"name": "Boom", "args": {"node": "bad"}}],
            }
        ]
    }
    e = ServedExtender(config, {"Boom": Boom})
    try:
        for n in ("good", "bad"):
            e.add_node(n)
        status, res = e.post("filter", {"Pod": go_pod(), "NodeNames": ["good", "bad"]})
        assert (
            status == 200
            and "Boom" in res["Error"]
            and "disk on fire" in res["Error"]
            and res["NodeNames"] == []
        )
        status, _ = e.post("prioritize", {"Pod": go_pod(), "NodeNames": ["good", "bad"]})
        assert status == 500  # a score outside 0..100 fails the call
        status, res = e.post("filter", {"Pod": go_pod(), "NodeNames": ["good"]})
        assert status == 200 and res["Error"] == "" and res["NodeNames"] == ["good"]
        status, res = e.post("prioritize", {"Pod": go_pod(), "NodeNames": ["good"]})
        # LoadAware (weight 1, no NodeMetric: 0) and Boom (weight 1, 50): round(50 / 20) = 3 (2.5 rounds up)
        assert status == 200 and res == [{"Host": "good", "Score": 3}]
        text = e.get("/metrics")[1]
        assert (
            'koord_scheduler_extender_plugin_errors_total{extension_point="filter",plugin="Boom"} 1.0' in text
        )
        assert 'koord_scheduler_extender_requests_total{result="error",verb="filter"} 1.0' in text
    finally:
        e.close()


def test_bind_reserves_then_binds(ext: ServedExtender) -> None:
    incoming = go_pod(requests={"cpu": "2"}, limits={"cpu": "2"})
    ext.post("filter", {"Pod": incoming, "NodeNames": ["idle"]})
    before = ext.extender.explain("idle", incoming)
    status, res = ext.post(
        "bind", {"PodName": "incoming", "PodNamespace": "default", "PodUID": "uid-incoming", "Node": "idle"}
    )
    assert status == 200 and res == {"Error": ""}
    assert ext.binder.calls == [("default", "incoming", "uid-incoming", "idle")]
    dbg = ext.extender.framework.debug_node("idle")["LoadAwareScheduling"]
    assert dbg["nodeDelta"][0] == 1700  # counted before the pod informer has seen the binding
    after = ext.extender.explain("idle", incoming)
    assert after["scores"]["LoadAwareScheduling"] < before["scores"]["LoadAwareScheduling"]


def test_bind_failure_unreserves_and_reports(ext: ServedExtender) -> None:
    incoming = go_pod(requests={"cpu": "2"}, limits={"cpu": "2"})
    ext.post("filter", {"Pod": incoming, "NodeNames": ["idle"]})
    ext.binder.fail_with = 'pods "incoming" is already assigned'
    status, res = ext.post(
        "bind", {"podname": "incoming", "podnamespace": "default", "poduid": "uid-incoming", "node": "idle"}
    )
    assert status == 200 and res == {"Error": 'pods "incoming" is already assigned'}
    assert ext.extender.framework.debug_node("idle")["LoadAwareScheduling"]["nodeDelta"] == [0, 0]


def test_bind_of_an_unknown_pod(ext: ServedExtender) -> None:
    status, res = ext.post(
        "bind", {"PodName": "nobody", "PodNamespace": "default", "PodUID": "x", "Node": "idle"}
    )
    assert status == 200 and "not in the extender's cache" in res["Error"]
    assert ext.binder.calls == []
    # a pod known only to the pod cache (no filter call seen) is bound too
    ext.pods.put(pod("cached", uid="uid-cached"))
    status, res = ext.post(
        "bind", {"PodName": "cached", "PodNamespace": "default", "PodUID": "uid-cached", "Node": "idle"}
    )
    assert res == {"Error": ""} and ext.binder.calls == [("default", "cached", "uid-cached", "idle")]


def test_metrics_and_debug_route(ext: ServedExtender) -> None:
    ext.post("filter", {"Pod": go_pod(), "NodeNames": ["idle", "busy"]})
    status, text = ext.get("/metrics")
    assert status == 200
    assert 'koord_scheduler_extender_filter_rejections_total{plugin="LoadAwareScheduling"} 1.0' in text
    assert 'koord_scheduler_extender_request_duration_seconds_count{verb="filter"} 1.0' in text
    status, body = ext.get("/debug/nodes/busy")
    doc = json.loads(body)
    assert status == 200 and doc["node"] == "busy" and not doc["passes"]
    assert doc["filter"] == [{"plugin": "LoadAwareScheduling", "filter": BUSY}]
    assert doc["plugins"]["LoadAwareScheduling"]["nodeUsage"] == [15000, 0]
    ext.pods.put(pod("web", requests={"cpu": "100m"}))
    doc = json.loads(ext.get("/debug/nodes/idle?pod=default/web")[1])
    assert doc["pod"] == "default/web" and doc["passes"] and doc["extenderScore"] == 10
    assert ext.get("/debug/nodes/idle?pod=default/nope")[0] == 404


def encode_priorities(scores: dict[str, int]) -> bytes:
    """The ``/prioritize`` body for ``scores`` (node -> score), as the server writes it."""
    from koord.scheduler.extender.wire import encode_priorities, host_entry

    return encode_priorities([host_entry(h) for h in scores], list(scores.values()))


def test_priorities_encoding_escapes_odd_names() -> None:
    plain = {"node-1.example.com": 7, "n2": 0}
    assert json.loads(encode_priorities(plain)) == [
        {"Host": "node-1.example.com", "Score": 7},
        {"Host": "n2", "Score": 0},
    ]
    odd = {'we"ird\\': 3, "ünïcode": 1}
    assert json.loads(encode_priorities(odd)) == [
        {"Host": 'we"ird\\', "Score": 3},
        {"Host": "ünïcode", "Score": 1},
    ]
    assert encode_priorities({}) == b"[]"


def test_answers_written_by_hand_read_as_json_writes_them() -> None:
    from koord.scheduler.extender.wire import encode_filter

    failed = {f"n{i}": ("node(s) cpu usage exceed threshold" if i % 2 else 'said "no"') for i in range(6)}
    for passed, fails, unres, error in (
        (["a", "b.example.com"], failed, {"x": "gone"}, ""),
        ([], {}, {}, "koord-scheduler-extender: caches not synced yet"),
        (["ünïcode", "a"], {'we"ird': "r"}, {}, ""),  # not plain: json.dumps writes it
    ):
        doc = json.loads(encode_filter(None, passed, fails, unres, error))
        assert doc == {
            "Nodes": None,
            "NodeNames": passed,
            "FailedNodes": fails,
            "FailedAndUnresolvableNodes": unres,
            "Error": error,
        }
    scores = {f"node-{i}": i % 11 for i in range(30)}
    assert json.loads(encode_priorities(scores)) == [{"Host": h, "Score": s} for h, s in scores.items()]
    assert json.loads(encode_priorities({"a": 11})) == [{"Host": "a", "Score": 11}]  # out of range: as is
