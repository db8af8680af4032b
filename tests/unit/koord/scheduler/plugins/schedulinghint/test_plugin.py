"""SchedulingHint: the hint annotation read at BeforePreFilter (the internal key first, the deprecated one
otherwise, bad JSON an error), ``nodeNames`` as PreFilter's node list, ``preferredNodeNames`` tried first
(cut to ``maxHintNodes`` and to PreFilter's nodes), and end to end in MemoryScheduler: where hinted pods
land, the fallback when no preferred node fits, and the error a bad hint reports."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koord.scheduler.framework import SKIP, CycleState, PodInfo, Status
from koord.scheduler.framework.hinter import hint_state
from koord.scheduler.framework.interface import Code
from koord.scheduler.framework.types import PreFilterResult
from koord.scheduler.plugins.schedulinghint import NAME, SchedulingHint
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.extension.schedulinghint import (
    ANNOTATION_SCHEDULING_HINT,
    DEPRECATED_ANNOTATION_SCHEDULING_HINT,
)
from koordshared.runtime.errors import InvalidArgs
from koordshared.testing.objects import node, pod

S = "koord-scheduler"


def hinted(name: str, hint: Any, key: str = ANNOTATION_SCHEDULING_HINT, **kw: Any) -> dict[str, Any]:
    text = hint if isinstance(hint, str) else json.dumps(hint)
    return pod(name, annotations={key: text}, scheduler_name=S, **kw)


def before(plugin: SchedulingHint, p: dict[str, Any]) -> tuple[CycleState, Any]:
    state = CycleState(PodInfo(p))
    _, transformed, status = plugin.before_pre_filter(state, p)
    assert not transformed
    return state, status


def test_the_hint_goes_into_the_cycle_state_for_the_other_plugins() -> None:
    plugin = SchedulingHint(None, None)
    hint = {"nodeNames": ["a", "b"], "preferredNodeNames": ["b"], "extensions": {"DeviceShare": {}}}
    state, status = before(plugin, hinted("p", hint))
    assert status is None
    got = hint_state(state)
    assert got is not None
    assert (got.pre_filter_nodes, got.preferred_nodes, dict(got.extensions)) == (
        ("a", "b"),
        ("b",),
        {"DeviceShare": {}},
    )
    assert plugin.pre_filter(state, hinted("p", hint)) == PreFilterResult(frozenset({"a", "b"}))

    # No hint, or an empty one: nothing written, PreFilter does not narrow.
    for p in (pod("plain"), hinted("empty", "")):
        state, status = before(plugin, p)
        assert status is None and hint_state(state) is None and plugin.pre_filter(state, p) is None


def test_the_internal_annotation_wins_and_the_deprecated_one_is_read_alone() -> None:
    plugin = SchedulingHint(None, None)
    both = hinted("p", {"nodeNames": ["new"]})
    both["metadata"]["annotations"][DEPRECATED_ANNOTATION_SCHEDULING_HINT] = json.dumps(
        {"nodeNames": ["old"]}
    )
    state, _ = before(plugin, both)
    assert plugin.pre_filter(state, both) == PreFilterResult(frozenset({"new"}))
    old = hinted("q", {"nodeNames": ["old"]}, key=DEPRECATED_ANNOTATION_SCHEDULING_HINT)
    state, _ = before(plugin, old)
    assert plugin.pre_filter(state, old) == PreFilterResult(frozenset({"old"}))


@pytest.mark.parametrize("bad", ["{not json", '["a"]', '{"nodeNames": "a"}', '{"extensions": []}'])
def test_a_bad_hint_is_an_error_naming_the_annotation(bad: str) -> None:
    _, status = before(SchedulingHint(None, None), hinted("p", bad))
    assert status is not None and status.code is Code.ERROR
    assert ANNOTATION_SCHEDULING_HINT in status.message


def preferred(
    plugin: SchedulingHint, state: CycleState, p: dict[str, Any], result: PreFilterResult | None
) -> list[str]:
    got = plugin.prefer_nodes(state, p, result)
    assert not isinstance(got, Status), got
    return list(got)


def test_preferred_nodes_are_cut_to_max_hint_nodes_and_to_prefilters_nodes() -> None:
    plugin = SchedulingHint({"maxHintNodes": 2}, None)
    p = hinted("p", {"preferredNodeNames": ["c", "a", "b"]})
    state, _ = before(plugin, p)
    assert preferred(plugin, state, p, None) == ["c", "a"]
    assert preferred(plugin, state, p, PreFilterResult(frozenset({"a", "b"}))) == ["a"]
    # Both kept ones left out by PreFilter: search as usual (the third is past maxHintNodes).
    assert plugin.prefer_nodes(state, p, PreFilterResult(frozenset({"b"}))) is SKIP
    state, _ = before(plugin, pod("plain"))
    assert plugin.prefer_nodes(state, pod("plain"), None) is SKIP


@pytest.mark.parametrize(
    "args", [{"maxHintNodes": 0}, {"maxHintNodes": -1}, {"maxHintNodes": "5"}, {"max": 1}]
)
def test_bad_args_are_refused(args: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgs):
        SchedulingHint(args, None)
    assert SchedulingHint(None, None).args.max_hint_nodes == 100


def kit(enabled: bool = True) -> MemoryScheduler:
    pre_filter = {"enabled": [{"name": NAME}]} if enabled else {}
    k = MemoryScheduler({"profiles": [{"schedulerName": S, "plugins": {"preFilter": pre_filter}}]})
    # "busy" is the least attractive node by the default scores; "full" has no room at all.
    k.add_node(node("free", "8", "16Gi"))
    k.add_node(node("busy", "8", "16Gi"))
    k.add_node(node("full", "500m", "16Gi"))
    k.add_pod(pod("load", requests={"cpu": "6"}, node_name="busy", scheduler_name=S))
    return k


def test_end_to_end_hinted_pods_land_where_the_hint_says() -> None:
    k = kit()
    k.add_pod(hinted("must", {"nodeNames": ["busy"]}, requests={"cpu": "1"}))
    k.add_pod(hinted("prefers", {"preferredNodeNames": ["full", "busy", "free"]}, requests={"cpu": "1"}))
    k.add_pod(hinted("cannot", {"preferredNodeNames": ["full"]}, requests={"cpu": "1"}))
    k.add_pod(hinted("nowhere", {"nodeNames": ["full"]}, requests={"cpu": "1"}))
    k.run()
    bound = k.bound()
    assert bound["default/must"] == "busy"
    assert bound["default/prefers"] == "busy"  # "full" fails its filter; "busy" is tried before "free"
    assert bound["default/cannot"] == "free"  # no preferred node fits: scheduled as usual (best score)
    assert "default/nowhere" not in bound
    (failed,) = [e for e in k.events("FailedScheduling") if e[0] == "default/nowhere"]
    assert "Insufficient cpu" in failed[3]


def test_end_to_end_a_bad_hint_fails_with_its_reason_and_the_hint_is_ignored_without_the_plugin() -> None:
    k = kit()
    k.add_pod(hinted("bad", "{oops", requests={"cpu": "1"}))
    k.run()
    assert "default/bad" not in k.bound()
    (failed,) = k.events("FailedScheduling")
    assert ANNOTATION_SCHEDULING_HINT in failed[3] and "not JSON" in failed[3]

    k = kit(enabled=False)
    k.add_pod(hinted("must", {"nodeNames": ["busy"]}, requests={"cpu": "1"}))
    k.run()
    assert k.bound()["default/must"] == "free"
