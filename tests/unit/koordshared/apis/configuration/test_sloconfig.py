"""NodeSLO keys of slo-controller-config: cluster over defaults, nodes over cluster; the rendered spec."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koordshared.apis.configuration import slocontroller as sloconfig
from koordshared.apis.configuration.slocontroller import InvalidConfig
from koordshared.apis.slo import nodeslo

RT_KEY = "resource-threshold-config"


def parse(key: str, doc: Any) -> sloconfig.KeyConfig:
    return sloconfig.parse_key(key, json.dumps(doc))


def test_defaults_render_koordinators_default_nodeslo() -> None:
    spec = sloconfig.render_spec({}, {}, {})
    assert spec == {
        "resourceUsedThresholdWithBE": {
            "enable": False,
            "cpuSuppressThresholdPercent": 65,
            "cpuSuppressPolicy": "cpuset",
            "memoryEvictThresholdPercent": 70,
            "cpuEvictPolicy": "evictByRealLimit",
        },
        "resourceQOSStrategy": {},
        "cpuBurstStrategy": {
            "policy": "none",
            "cpuBurstPercent": 1000,
            "cfsQuotaBurstPercent": 300,
            "cfsQuotaBurstPeriodSeconds": -1,
            "sharePoolThresholdPercent": 50,
        },
        "systemStrategy": {"totalNetworkBandwidth": "0"},
        "extensions": {},
    }
    # What the agent makes of it is exactly its own defaults.
    assert nodeslo.build(spec) == nodeslo.build(None)


def test_cluster_then_first_matching_node_strategy() -> None:
    cfg = parse(
        RT_KEY,
        {
            "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60},
            "nodeStrategies": [
                {
                    "name": "a",
                    "nodeSelector": {"matchLabels": {"pool": "a"}},
                    "cpuSuppressThresholdPercent": 40,
                },
                {
                    "name": "a-again",
                    "nodeSelector": {"matchLabels": {"pool": "a"}},
                    "cpuSuppressThresholdPercent": 30,
                },
            ],
        },
    )
    configs = {RT_KEY: cfg}
    a = sloconfig.render_spec(configs, {"pool": "a"}, {})["resourceUsedThresholdWithBE"]
    other = sloconfig.render_spec(configs, {"pool": "b"}, {})["resourceUsedThresholdWithBE"]
    assert (a["enable"], a["cpuSuppressThresholdPercent"], a["memoryEvictThresholdPercent"]) == (True, 40, 70)
    assert (other["enable"], other["cpuSuppressThresholdPercent"]) == (True, 60)
    assert "name" not in a and "nodeSelector" not in a


@pytest.mark.parametrize(
    ("key", "doc"),
    [
        (RT_KEY, "{oops"),
        (RT_KEY, json.dumps({"clusterStrategy": {"cpuSuppressThresholdPercent": 150}})),
        (RT_KEY, json.dumps({"clusterStrategy": "on"})),
        (RT_KEY, json.dumps({"nodeStrategies": [{"name": "x", "memoryEvictThresholdPercent": "high"}]})),
        ("cpu-burst-config", json.dumps({"clusterStrategy": {"policy": "always"}})),
        (
            "resource-qos-config",
            json.dumps({"clusterStrategy": {"beClass": {"cpuQOS": {"groupIdentity": 7}}}}),
        ),
        ("host-application-config", json.dumps({"applications": [{"name": ""}]})),
    ],
)
def test_malformed_keys_are_refused(key: str, doc: str) -> None:
    with pytest.raises(InvalidConfig):
        sloconfig.parse_key(key, doc)


def test_host_applications_bandwidth_and_extensions() -> None:
    apps = parse(
        "host-application-config",
        {
            "applications": [{"name": "nginx", "qos": "LS"}],
            "nodeConfigs": [
                {"name": "db", "nodeSelector": {"matchLabels": {"role": "db"}}, "applications": []}
            ],
        },
    )
    ann = {sloconfig.ANNOTATION_NODE_BANDWIDTH: "10G"}
    spec = sloconfig.render_spec({"host-application-config": apps}, {}, ann, {"extensions": {"x": {"y": 1}}})
    assert spec["hostApplications"] == [{"name": "nginx", "qos": "LS"}]
    assert spec["systemStrategy"]["totalNetworkBandwidth"] == "10G"
    assert spec["extensions"] == {"x": {"y": 1}}
    db = sloconfig.render_spec(
        {"host-application-config": apps}, {"role": "db"}, {sloconfig.ANNOTATION_NODE_BANDWIDTH: "lots"}
    )
    assert "hostApplications" not in db and db["systemStrategy"]["totalNetworkBandwidth"] == "0"
