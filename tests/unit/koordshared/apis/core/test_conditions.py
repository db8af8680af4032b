"""Status conditions read off any object's JSON (the one of a type, whether it is True, what a pod's and a
node's conditions say; malformed entries skipped, never raised on) and set as kube's
``UpdatePodCondition`` sets them."""

from __future__ import annotations

from typing import Any

from koordshared.apis.core.node import is_ready as node_ready
from koordshared.apis.core.pod import condition, condition_true, is_bound, is_ready, with_condition


def _with(*conditions: Any) -> dict[str, Any]:
    return {"status": {"conditions": list(conditions)}}


def test_the_condition_of_a_type_and_whether_it_is_true() -> None:
    scheduled = {"type": "PodScheduled", "status": "True", "reason": "x"}
    obj = _with("junk", None, {"type": "Ready", "status": "False"}, scheduled)
    assert condition(obj, "PodScheduled") is scheduled
    assert condition(obj, "Initialized") is None
    assert condition_true(obj, "PodScheduled") and not condition_true(obj, "Ready")
    assert not condition_true(obj, "Initialized")
    assert condition({"status": "broken"}, "Ready") is None and condition({}, "Ready") is None


def test_a_pod_bound_by_the_api_server_and_one_only_assumed() -> None:
    assumed = {"spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}}
    assert not is_bound(assumed)
    assert is_bound({**assumed, **_with({"type": "PodScheduled", "status": "True"})})
    assert not is_bound({**assumed, **_with({"type": "PodScheduled", "status": "False"})})
    assert is_ready(_with({"type": "Ready", "status": "True"})) and not is_ready(assumed)


def test_a_node_is_ready_unless_its_ready_condition_says_otherwise() -> None:
    assert node_ready({}) and node_ready(_with({"type": "Ready", "status": "True"}))
    assert not node_ready(_with({"type": "Ready", "status": "Unknown"}))


def test_a_condition_set_as_update_pod_condition_sets_it() -> None:
    unschedulable = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "lastTransitionTime": "t1",
    }
    ready = {"type": "Ready", "status": "False", "lastTransitionTime": "t0"}
    before = [ready, unschedulable]
    # Another status: replaced whole (the old reason goes), its own transition time, in the old place.
    bound = with_condition(before, {"type": "PodScheduled", "status": "True", "lastTransitionTime": "t2"})
    assert bound == [ready, {"type": "PodScheduled", "status": "True", "lastTransitionTime": "t2"}]
    # The same status: the new fields, the transition time it had.
    again = with_condition(before, {**unschedulable, "message": "0/3 nodes", "lastTransitionTime": "t3"})
    assert again[1] == {**unschedulable, "message": "0/3 nodes", "lastTransitionTime": "t1"}
    # None of its type: appended; the list given is left as it was.
    assert with_condition([ready], unschedulable) == [ready, unschedulable]
    assert before == [ready, unschedulable] and unschedulable["lastTransitionTime"] == "t1"
