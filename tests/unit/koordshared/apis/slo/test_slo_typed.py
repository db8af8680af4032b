"""The typed ``resourceQOSStrategy`` and ``systemStrategy`` of a NodeSLO: built once after validation,
equal to the merged JSON they come from, neutral where unset."""

from __future__ import annotations

from typing import Any

from koordlet import api
from koordshared.apis.slo import nodeslo
from tests.support.jsonpath import at


def test_defaults_are_the_neutral_values_of_an_unbuilt_nodeslo() -> None:
    built = nodeslo.build(None)
    # a NodeSLO made by hand (tests, the plugin kit) means what Koordinator's defaults mean
    assert built.resource_qos == api.NodeSLO().resource_qos
    assert built.system == api.SystemStrategy()
    assert built.resource_qos.policies == api.ResourceQOSPolicies("groupIdentity", "tc")


def test_typed_classes_follow_the_merged_json() -> None:
    spec: dict[str, Any] = {
        "resourceQOSStrategy": {
            "policies": {"netQOSPolicy": "terway-qos"},
            "beClass": {
                "cpuQOS": {"enable": True},
                "resctrlQOS": {"enable": True, "catRangeEndPercent": 30, "mbaPercent": 40},
                "memoryQOS": {"enable": True, "minLimitPercent": 10, "wmarkMinAdj": 30},
                "blkioQOS": {
                    "enable": True,
                    "blocks": [{"name": "vdb", "ioCfg": {"readIOPS": 512, "enableUserModel": True}}],
                },
            },
            "lsClass": {"memoryQOS": {"enable": False, "minLimitPercent": 50}},
        }
    }
    s = nodeslo.build(spec)
    be = s.resource_qos.be_class
    raw = s.resource_qos_strategy["beClass"]
    assert be == s.resource_qos.of("beClass")
    assert be.cpu_qos == api.CPUQOS(enable=True, group_identity=-1, sched_idle=0, core_expeller=False)
    assert be.resctrl_qos == api.ResctrlQOS(True, 0, 30, 40)
    assert be.memory_qos.min_limit_percent == at(raw, "memoryQOS", "minLimitPercent") == 10
    assert (be.memory_qos.wmark_ratio, be.memory_qos.wmark_min_adj) == (95, 30)  # class default kept
    assert be.blkio_qos == api.BlkIOQOS(
        enable=True, blocks=(api.BlockCfg("vdb", "device", api.IOCfg(read_iops=512, enable_user_model=True)),)
    )
    # a disabled section carries Koordinator's neutral values, whatever the spec set
    assert s.resource_qos.ls_class.memory_qos == api.MemoryQOS()
    assert s.resource_qos.policies.net_qos_policy == "terway-qos"
    # the compatibility mapping holds the very values of the typed classes
    assert s.network_qos == {k: s.resource_qos.of(k).network_qos for k in api.CLASS_KEYS}


def test_typed_system_strategy() -> None:
    s = nodeslo.build(
        {
            "systemStrategy": {
                "minFreeKbytesFactor": 100,
                "memcgReapBackGround": 1,
                "schedFeatures": {"ID_ABSOLUTE_EXPEL": True},
                "totalNetworkBandwidth": "1G",
            }
        }
    )
    assert s.system == api.SystemStrategy(
        min_free_kbytes_factor=100, memcg_reap_back_ground=1, sched_features={"ID_ABSOLUTE_EXPEL": True}
    )
    assert s.total_network_bandwidth_bps == 10**9


def test_json_fields_skips_wrong_types_and_reports_unknown_keys() -> None:
    known, unknown = nodeslo.json_fields(
        api.MemoryQOS, {"minLimitPercent": 5, "lowLimitPercent": True, "priority": "1", "policy": "auto"}
    )
    assert known == {"min_limit_percent": 5}
    assert unknown == ["policy"]
    # an annotation's blocks: an odd entry or field is skipped, the rest kept
    assert api.blocks([{"name": 3, "ioCfg": {"readBPS": 10, "writeBPS": "x"}}, "vdb"]) == (
        api.BlockCfg(io_cfg=api.IOCfg(read_bps=10)),
    )
    assert api.blocks("vdb") == api.blocks(None) == ()
