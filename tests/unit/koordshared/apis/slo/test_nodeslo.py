"""NodeSLO spec merge over Koordinator's defaults and validation (shared by the agent and the manager)."""

from __future__ import annotations

from typing import Any

import pytest

from koordlet import api
from koordshared.apis.slo import nodeslo
from tests.support.jsonpath import at


def test_defaults_match_api_defaults() -> None:
    slo = nodeslo.build(None)
    assert slo.resource_used_threshold_with_be == api.ResourceThresholdStrategy()
    assert slo.cpu_burst_strategy == api.CPUBurstStrategy()
    be = at(slo.resource_qos_strategy, "beClass")
    # cpuQOS disabled by default -> Koordinator's neutral values, not the class defaults
    assert at(be, "cpuQOS", "groupIdentity") == 0
    assert at(be, "resctrlQOS", "catRangeEndPercent") == 100


def test_merge_keeps_defaults_for_nil_fields() -> None:
    slo = nodeslo.build(
        {
            "resourceUsedThresholdWithBE": {
                "enable": True,
                "cpuSuppressThresholdPercent": 50,
                "memoryEvictThresholdPercent": None,
            },
            "cpuBurstStrategy": {"policy": "auto"},
            "resourceQOSStrategy": {"beClass": {"cpuQOS": {"enable": True}}},
            "hostApplications": [{"name": "nginx", "priority": "koord-prod", "qos": "LS"}],
        }
    )
    rt = slo.resource_used_threshold_with_be
    assert (rt.enable, rt.cpu_suppress_threshold_percent, rt.memory_evict_threshold_percent) == (True, 50, 70)
    assert rt.cpu_suppress_policy == "cpuset"
    assert slo.cpu_burst_strategy == api.CPUBurstStrategy(policy="auto")
    be = at(slo.resource_qos_strategy, "beClass", "cpuQOS")
    assert (at(be, "enable"), at(be, "groupIdentity")) == (True, -1)  # enabled: the class default survives
    assert slo.host_applications == (
        api.HostApplication(name="nginx", priority=api.PriorityClass.PROD, qos=api.QOSClass.LS),
    )


def test_merge_function_semantics() -> None:
    base = {"a": {"b": 1, "c": 2}, "l": [1, 2]}
    out = nodeslo.merge(base, {"a": {"b": None, "c": 5}, "l": [3], "n": 1})
    assert out == {"a": {"b": 1, "c": 5}, "l": [3], "n": 1}
    assert base == {"a": {"b": 1, "c": 2}, "l": [1, 2]}


RT = "resourceUsedThresholdWithBE"


@pytest.mark.parametrize(
    "spec",
    [
        {RT: {"cpuSuppressThresholdPercent": -1}},
        {RT: {"cpuSuppressThresholdPercent": 150}},
        {RT: {"memoryEvictThresholdPercent": 70, "memoryEvictLowerPercent": 70}},
        {RT: {"memoryEvictThresholdPercent": "70"}},
        {RT: {"enable": "yes"}},
        {RT: {"cpuSuppressPolicy": "magic"}},
        {RT: {"cpuEvictBESatisfactionLowerPercent": 70, "cpuEvictBESatisfactionUpperPercent": 80}},
        {RT: {"cpuEvictBESatisfactionLowerPercent": 50, "cpuEvictBESatisfactionUpperPercent": 40}},
        {RT: {"cpuEvictBESatisfactionUpperPercent": 100}},
        {RT: {"cpuEvictTimeWindowSeconds": 0}},
        {RT: "enabled"},
        {"cpuBurstStrategy": {"policy": "always"}},
        {"cpuBurstStrategy": {"sharePoolThresholdPercent": 101}},
        {"resourceQOSStrategy": {"beClass": {"cpuQOS": {"groupIdentity": 3}}}},
        {"resourceQOSStrategy": {"policies": {"cpuPolicy": "fair"}}},
        {
            "resourceQOSStrategy": {
                "lsClass": {"resctrlQOS": {"catRangeStartPercent": 80, "catRangeEndPercent": 20}}
            }
        },
        {"hostApplications": [{"name": ""}]},
        {"hostApplications": [{"name": "x", "cgroupPath": {"relativePath": "../../etc"}}]},
        {"hostApplications": {"name": "x"}},
        "not a spec",
        [],
    ],
)
def test_invalid_specs_refused(spec: Any) -> None:
    with pytest.raises(nodeslo.InvalidNodeSLO):
        nodeslo.build(spec)


def test_all_problems_listed() -> None:
    with pytest.raises(nodeslo.InvalidNodeSLO) as info:
        nodeslo.build({RT: {"cpuSuppressThresholdPercent": 200, "cpuSuppressPolicy": "x"}})
    assert len(info.value.problems) == 2


@pytest.mark.parametrize(
    "thresholds",
    [
        # every range the BE plugins used to check again themselves, refused here once for all of them
        {"cpuSuppressThresholdPercent": 0},
        {"cpuSuppressThresholdPercent": 120},
        {"cpuSuppressThresholdPercent": 50, "cpuSuppressMinPercent": 60},
        {"cpuSuppressMinPercent": 70},  # above the default threshold 65 it inherits
        {"cpuSuppressPolicy": "bogus"},
        {"memoryEvictThresholdPercent": 0},
        {"memoryEvictThresholdPercent": 1},  # the default lower bound would be -1
        {"memoryEvictThresholdPercent": 70, "memoryEvictLowerPercent": 70},
        {"memoryEvictLowerPercent": 80},  # not below the default threshold 70
        {"cpuEvictBESatisfactionLowerPercent": 70, "cpuEvictBESatisfactionUpperPercent": 80},
        {"cpuEvictBESatisfactionLowerPercent": 50, "cpuEvictBESatisfactionUpperPercent": 40},
        {"cpuEvictBESatisfactionUpperPercent": 100},
        {"cpuEvictBEUsageThresholdPercent": 0},
        {"cpuEvictTimeWindowSeconds": 0},
        {"cpuEvictPolicy": "bogus"},
    ],
)
def test_thresholds_plugins_cannot_act_on_are_refused(thresholds: dict[str, Any]) -> None:
    with pytest.raises(nodeslo.InvalidNodeSLO):
        nodeslo.build({"resourceUsedThresholdWithBE": {"enable": True, **thresholds}})


def test_the_memory_lower_bound_defaults_two_points_below_the_threshold() -> None:
    slo = nodeslo.build({"resourceUsedThresholdWithBE": {"memoryEvictThresholdPercent": 80}})
    assert slo.resource_used_threshold_with_be.memory_evict_lower == 78
    slo = nodeslo.build({"resourceUsedThresholdWithBE": {"memoryEvictLowerPercent": 60}})
    assert slo.resource_used_threshold_with_be.memory_evict_lower == 60


def test_network_qos_resolved_to_bits_per_second() -> None:
    slo = nodeslo.build(
        {
            "systemStrategy": {"totalNetworkBandwidth": "1G"},
            "resourceQOSStrategy": {
                "beClass": {
                    "networkQOS": {
                        "enable": True,
                        "egressRequest": 10,
                        "egressLimit": "300M",
                        "ingressLimit": "25%",
                    }
                }
            },
        }
    )
    assert slo.total_network_bandwidth_bps == 10**9
    be = slo.network_qos["beClass"]
    # an integer or "N%" is a percent of the link, another string a quantity (bit/s)
    assert (
        be.enable,
        be.egress_request_bps,
        be.egress_limit_bps,
        be.ingress_limit_bps,
        be.ingress_request_bps,
    ) == (
        True,
        10**8,
        3 * 10**8,
        25 * 10**7,
        0,
    )
    assert not slo.network_qos["lsClass"].enable
    assert nodeslo.build(None).total_network_bandwidth_bps == 0


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            {"resourceQOSStrategy": {"lsClass": {"networkQOS": {"egressLimit": 101}}}},
            "egressLimit: 101 outside",
        ),
        ({"resourceQOSStrategy": {"lsClass": {"networkQOS": {"egressLimit": "fast"}}}}, "is not a quantity"),
        (
            {"resourceQOSStrategy": {"lsClass": {"networkQOS": {"egressLimit": "120%"}}}},
            "not a percent from 0%",
        ),
        (
            {"resourceQOSStrategy": {"lsClass": {"networkQOS": {"egressLimit": "-5%"}}}},
            "not a percent from 0%",
        ),
        ({"systemStrategy": {"totalNetworkBandwidth": "-5M"}}, "totalNetworkBandwidth"),
        ({"systemStrategy": {"watermarkScaleFactor": "150"}}, "watermarkScaleFactor: must be an integer"),
        ({"systemStrategy": {"memcgReapBackGround": 2}}, "memcgReapBackGround: 2 outside [0, 1]"),
        ({"systemStrategy": {"schedFeatures": {"no_x": True}}}, "schedFeatures"),
        ({"systemStrategy": {"schedFeatures": {"X": "on"}}}, "schedFeatures"),
        (
            {"resourceQOSStrategy": {"beClass": {"blkioQOS": {"blocks": [{"name": "vdb", "type": "disk"}]}}}},
            "blocks[0].type",
        ),
        (
            {
                "resourceQOSStrategy": {
                    "beClass": {"blkioQOS": {"blocks": [{"ioCfg": {"ioWeightPercent": 0}}]}}
                }
            },
            "ioWeightPercent: 0 outside [1, 100]",
        ),
        ({"resourceQOSStrategy": {"beClass": {"blkioQOS": {"blocks": "vdb"}}}}, "blocks: must be a list"),
    ],
)
def test_node_qos_sections_refused_with_the_reason(spec: dict[str, Any], problem: str) -> None:
    with pytest.raises(nodeslo.InvalidNodeSLO) as err:
        nodeslo.build(spec)
    assert problem in str(err.value)
