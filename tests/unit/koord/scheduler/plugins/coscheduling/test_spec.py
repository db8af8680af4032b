"""Coscheduling's args (Koordinator's defaults, refusals naming the field) and a gang's description read
from its pods or PodGroup (``tryInitByPodConfig``/``tryInitByPodGroup``: fallbacks, now told)."""

from __future__ import annotations

from typing import Any

import pytest

from koord.scheduler.framework import InvalidArgs
from koord.scheduler.plugins.coscheduling import gangspec
from koord.scheduler.plugins.coscheduling.args import CoschedulingArgs, parse_args
from koordshared.apis.extension.coscheduling import GangMode, MatchPolicy, gang_name
from tests.support.scheduler.gangkit import member, pod_group

ARGS = CoschedulingArgs()


def test_args_default_as_koordinator() -> None:
    args = parse_args(None)
    assert args == CoschedulingArgs(600.0, 1, MatchPolicy.ONCE_SATISFIED)
    shipped = parse_args(
        {
            "defaultTimeout": "5m",
            "controllerWorkers": 2,
            "skipCheckScheduleCycle": True,
            "enablePreemption": False,
            "awareNetworkTopology": False,
            "defaultMatchPolicy": "waiting-and-running",
        }
    )
    assert shipped == CoschedulingArgs(300.0, 2, MatchPolicy.WAITING_AND_RUNNING)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"defaultTimeout": "20m"}, "defaultTimeout: 20m0s exceeds the 15m0s a pod may wait at Permit"),
        ({"defaultTimeout": "-1s"}, "defaultTimeout: "),
        ({"defaultTimeout": 600}, "defaultTimeout: want a duration"),
        ({"controllerWorkers": 0}, "controllerWorkers: must be at least 1, got 0"),
        ({"defaultMatchPolicy": "all"}, "defaultMatchPolicy: 'all' unknown; want one of only-waiting"),
        ({"enablePreemption": True}, "enablePreemption: job-level preemption is not supported"),
        ({"awareNetworkTopology": True}, "awareNetworkTopology: network-topology-aware placement is not"),
        ({"timeout": "1m"}, "unknown field(s) timeout"),
    ],
)
def test_args_are_refused_naming_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgs) as err:
        parse_args(raw)
    assert message in str(err.value)


def test_a_pod_names_its_gang_by_label_then_lightweight_label_then_annotation() -> None:
    p = member("p", "by-annotation", 2)
    assert gang_name(p) == "by-annotation"
    p["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io/name"] = "lightweight"
    assert gang_name(p) == "lightweight"
    p["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] = "crd"
    assert gang_name(p) == "crd"
    assert gang_name({"metadata": {}}) == ""


def spec_of(**annotations: str) -> gangspec.GangSpec:
    return gangspec.from_pod(member("p", "g", 3, annotations=annotations), "default/g", ARGS)


def test_a_gang_from_its_pod_takes_koordinator_defaults() -> None:
    s = spec_of()
    assert (s.min_member, s.total, s.mode, s.match_policy, s.wait_seconds) == (
        3,
        3,
        GangMode.STRICT,
        MatchPolicy.ONCE_SATISFIED,
        600.0,
    )
    assert s.group == ("default/g",) and s.group_id == "default/g" and s.problems == ()
    s = spec_of(
        **{
            "gang.scheduling.koordinator.sh/total-number": "5",
            "gang.scheduling.koordinator.sh/mode": "NonStrict",
            "pod-group.scheduling.sigs.k8s.io/match-policy": "only-waiting",
            "gang.scheduling.koordinator.sh/waiting-time": "90s",
            "gang.scheduling.koordinator.sh/groups": '["default/z", "default/g"]',
        }
    )
    assert (s.total, s.mode, s.match_policy, s.wait_seconds) == (
        5,
        GangMode.NON_STRICT,
        MatchPolicy.ONLY_WAITING,
        90,
    )
    assert s.group == ("default/g", "default/z") and s.group_id == "default/g,default/z"
    assert spec_of(**{"gang.scheduling.koordinator.sh/waiting-time": "0s"}).wait_seconds == 600.0


def test_the_lightweight_min_available_label_wins_over_the_annotation() -> None:
    p = member("p", "g", 3)
    p["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io/min-available"] = "2"
    assert gangspec.from_pod(p, "default/g", ARGS).min_member == 2


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (
            None,
            "annotation gang.scheduling.koordinator.sh/min-available is missing: the gang's size is unknown",
        ),
        ("three", 'annotation gang.scheduling.koordinator.sh/min-available "three" is not an integer'),
        ("-1", "annotation gang.scheduling.koordinator.sh/min-available -1 is negative"),
        (
            "99999999999",
            'annotation gang.scheduling.koordinator.sh/min-available "99999999999" is out of range',
        ),
    ],
)
def test_an_unreadable_min_available_leaves_the_gang_undefined(value: str | None, why: str) -> None:
    with pytest.raises(gangspec.BadGang) as err:
        gangspec.from_pod(member("p", "g", value), "default/g", ARGS)
    assert str(err.value) == why


def test_a_group_entry_that_is_not_namespace_name_is_told() -> None:
    s = spec_of(**{"gang.scheduling.koordinator.sh/groups": '["g2"]'})
    assert s.group == ("g2",)
    assert s.problems == (
        'annotation gang.scheduling.koordinator.sh/groups: "g2" is not namespace/name, so no gang matches it',
    )


def test_a_gang_from_its_podgroup() -> None:
    s = gangspec.from_pod_group(pod_group("pg", 4, scheduleTimeoutSeconds=120), "default/pg", ARGS)
    assert (s.min_member, s.total, s.wait_seconds, s.from_pod_group) == (4, 4, 120.0, True)
    pg = pod_group("pg", 4, scheduleTimeoutSeconds=0)
    pg["metadata"]["annotations"] = {
        "gang.scheduling.koordinator.sh/waiting-time": "30s",  # not read for a PodGroup, as Koordinator
        "gang.scheduling.koordinator.sh/mode": "NonStrict",
    }
    s = gangspec.from_pod_group(pg, "default/pg", ARGS)
    assert (s.wait_seconds, s.mode) == (600.0, GangMode.NON_STRICT)
    assert s.problems == (
        "spec.scheduleTimeoutSeconds 0 is not a positive number of seconds: using the default 10m0s",
    )
    s = gangspec.from_pod_group(pod_group("pg", 4, scheduleTimeoutSeconds=3600), "default/pg", ARGS)
    assert s.wait_seconds == 900.0 and "exceeds the 15m0s" in s.problems[0]
