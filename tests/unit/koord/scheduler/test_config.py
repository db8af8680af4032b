"""koord-scheduler's KubeSchedulerConfiguration: kube-scheduler's defaults (plugins in its order and
weights, backoff, percentage), the two defaults that differ (schedulerName, Lease) and every refusal
naming the field."""

from __future__ import annotations

import re
from typing import Any

import pytest

from koord.scheduler.config import (
    DEFAULT_SCHEDULER_NAME,
    KUBE_DEFAULT_PLUGINS,
    parse_configuration,
)
from koord.scheduler.framework.runtime import Framework
from koord.scheduler.plugins import plugin_registry
from koord.scheduler.testing import MemoryScheduler
from koordshared.runtime.errors import ConfigError, PluginError

V1 = "kubescheduler.config.k8s.io/v1"


class FifoSort:
    name = "FifoSort"

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def less(self, a: Any, b: Any) -> bool:
        return bool(a.timestamp < b.timestamp)


def _frameworks(doc: dict[str, Any]) -> dict[str, Framework]:
    kit = MemoryScheduler(doc, plugins={"FifoSort": FifoSort})
    kit.stop()
    return kit.scheduler.profiles


def _points(fw: Framework, point: str) -> list[tuple[str, int]]:
    return [(e.name, e.weight) for e in fw.points.get(point, ())]


def test_defaults() -> None:
    conf = parse_configuration(None)
    assert [p.scheduler_name for p in conf.profiles] == [DEFAULT_SCHEDULER_NAME] == ["koord-scheduler"]
    assert (conf.percentage_of_nodes_to_score, conf.parallelism) == (0, 16)
    assert (conf.pod_initial_backoff_seconds, conf.pod_max_backoff_seconds) == (1, 10)
    assert conf.leader_elect and conf.election == {}


def test_default_profile_is_kube_schedulers_plugins_in_order_with_weights() -> None:
    registry = plugin_registry(entry_points=lambda: [])
    fw = _frameworks({})[DEFAULT_SCHEDULER_NAME]
    implemented = [r for r in KUBE_DEFAULT_PLUGINS if r.name in registry.names()]
    # Scores as kube-scheduler weighs them (TaintToleration 3, NodeAffinity 2, ...).
    expected_scores = [(r.name, r.weight) for r in implemented if hasattr(fw.instances[r.name], "score")]
    assert _points(fw, "score") == expected_scores
    assert ("TaintToleration", 3) in expected_scores and ("NodeAffinity", 2) in expected_scores
    filters = [name for name, _ in _points(fw, "filter")]
    assert filters == [r.name for r in implemented if hasattr(fw.instances[r.name], "filter")]
    assert filters[:3] == ["NodeUnschedulable", "NodeName", "TaintToleration"]
    assert _points(fw, "queueSort") == [("PrioritySort", 1)]
    assert _points(fw, "bind") == [("DefaultBinder", 1)]
    assert [n for n, _ in _points(fw, "preEnqueue")][:1] == ["SchedulingGates"]


def test_profile_plugins_merge_over_the_defaults() -> None:
    doc = {
        "apiVersion": V1,
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "bin-packing",
                "plugins": {
                    "score": {
                        "disabled": [{"name": "NodeResourcesBalancedAllocation"}],
                        "enabled": [{"name": "NodeResourcesFit", "weight": 5}],
                    },
                    "filter": {"disabled": [{"name": "TaintToleration"}]},
                },
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {
                            "apiVersion": V1,
                            "kind": "NodeResourcesFitArgs",
                            "scoringStrategy": {"type": "MostAllocated"},
                        },
                    }
                ],
            },
            {"schedulerName": "second"},
        ],
    }
    fws = _frameworks(doc)
    assert set(fws) == {"bin-packing", "second"}
    packing = fws["bin-packing"]
    scores = dict(_points(packing, "score"))
    assert scores["NodeResourcesFit"] == 5 and "NodeResourcesBalancedAllocation" not in scores
    assert "TaintToleration" not in dict(_points(packing, "filter"))
    assert scores["TaintToleration"] == 3  # disabled at filter only
    assert packing.instances["NodeResourcesFit"].args.scoring.type == "MostAllocated"
    assert fws["second"].instances["NodeResourcesFit"].args.scoring.type == "LeastAllocated"


def test_disabling_everything_at_multipoint() -> None:
    fw = _frameworks(
        {
            "profiles": [
                {
                    "plugins": {
                        "multiPoint": {"disabled": [{"name": "*"}]},
                        "queueSort": {"enabled": [{"name": "PrioritySort"}]},
                        "bind": {"enabled": [{"name": "DefaultBinder"}]},
                        "filter": {"enabled": [{"name": "NodeName"}]},
                    }
                }
            ]
        }
    )[DEFAULT_SCHEDULER_NAME]
    assert _points(fw, "filter") == [("NodeName", 1)]
    assert _points(fw, "score") == []


def test_disabling_a_kube_plugin_koord_scheduler_lacks_is_fine() -> None:
    doc = {"profiles": [{"plugins": {"multiPoint": {"disabled": [{"name": "ImageLocality"}]}}}]}
    assert parse_configuration(doc).profiles[0].scheduler_name == DEFAULT_SCHEDULER_NAME


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"kind": "Deployment"}, "kind 'Deployment': want KubeSchedulerConfiguration"),
        (
            {"apiVersion": "kubescheduler.config.k8s.io/v1beta3"},
            "apiVersion 'kubescheduler.config.k8s.io/v1beta3'",
        ),
        ({"profile": []}, "unknown field(s) profile"),
        ({"extenders": [{"urlPrefix": "http://x"}]}, "koord-scheduler calls no extenders"),
        ({"profiles": {}}, "profiles: want a list"),
        (
            {"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]},
            "profiles[1].schedulerName: duplicate 'a'",
        ),
        ({"profiles": [{"plugin": {}}]}, "profiles[0]: unknown field(s) plugin"),
        ({"profiles": [{"plugins": {"filtre": {}}}]}, "profiles[0].plugins.filtre: unknown extension point"),
        (
            {"profiles": [{"plugins": {"score": {"enabled": [{"name": "ImageLocality"}]}}}]},
            "ImageLocality is a kube-scheduler plugin koord-scheduler does not implement",
        ),
        (
            {"profiles": [{"percentageOfNodesToScore": 101}]},
            "percentageOfNodesToScore: 101 must be in [0, 100]",
        ),
        ({"percentageOfNodesToScore": -1}, "percentageOfNodesToScore: -1 must be in [0, 100]"),
        ({"parallelism": 0}, "parallelism: 0 must be >= 1"),
        (
            {"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2},
            "podMaxBackoffSeconds: 2 must be greater",
        ),
        ({"podInitialBackoffSeconds": "1s"}, "podInitialBackoffSeconds: want an integer"),
        ({"clientConnection": {"qps": "5"}}, "clientConnection.qps: want a number"),
        ({"clientConnection": {"burst": -1}}, "clientConnection.burst: -1 must be >= 0"),
        ({"clientConnection": {"kubeConfig": "x"}}, "clientConnection: unknown field(s) kubeConfig"),
        ({"leaderElection": {"resourceLock": "endpoints"}}, "only leases are supported"),
        (
            {"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit"}, {"name": "NodeResourcesFit"}]}]},
            "duplicate pluginConfig for NodeResourcesFit",
        ),
    ],
)
def test_refusals_name_the_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_configuration(doc)


def test_leader_election_fields() -> None:
    conf = parse_configuration(
        {"leaderElection": {"leaderElect": False, "resourceName": "mine", "leaseDuration": "30s"}}
    )
    assert not conf.leader_elect
    assert conf.election == {"resourceName": "mine", "leaseDuration": 30.0}


def test_unknown_plugin_and_bad_args_name_the_plugin() -> None:
    with pytest.raises(PluginError, match="NoSuchPlugin"):
        _frameworks({"profiles": [{"plugins": {"filter": {"enabled": [{"name": "NoSuchPlugin"}]}}}]})
    bad_args = {
        "profiles": [
            {"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "X"}}}]}
        ]
    }
    with pytest.raises(PluginError, match=r"NodeResourcesFit.*scoringStrategy\.type"):
        _frameworks(bad_args)


def test_profiles_must_share_the_queue_sort() -> None:
    doc: dict[str, Any] = {
        "profiles": [
            {"schedulerName": "a"},
            {"schedulerName": "b", "plugins": {"queueSort": {"disabled": [{"name": "*"}]}}},
        ]
    }
    with pytest.raises(ConfigError, match="profile b: no queueSort plugin is enabled"):
        _frameworks(doc)
    doc["profiles"][1]["plugins"]["queueSort"]["enabled"] = [{"name": "FifoSort"}]
    with pytest.raises(ConfigError, match="every profile must use the same queueSort plugin"):
        _frameworks(doc)
    no_bind = {"profiles": [{"plugins": {"bind": {"disabled": [{"name": "*"}]}}}]}
    with pytest.raises(ConfigError, match="at least one bind plugin is needed"):
        _frameworks(no_bind)


@pytest.mark.parametrize(
    ("client", "want"),
    [
        ({}, (50.0, 100)),
        ({"qps": 0, "burst": 0}, (50.0, 100)),  # kube-scheduler's defaulting: 0 is unset
        ({"qps": 5, "burst": 7}, (5.0, 7)),
        ({"qps": -1}, (-1.0, 100)),  # client-go: no limit
    ],
)
def test_client_connection_defaults_as_kube_scheduler(
    client: dict[str, Any], want: tuple[float, int]
) -> None:
    conf = parse_configuration({"clientConnection": client})
    assert (conf.qps, conf.burst) == want
