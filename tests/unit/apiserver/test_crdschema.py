"""The CRD YAMLs and tests/crdschema.py: Koordinator's documented example objects validate, broken ones do
not."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests import crdschema
from tests.apiserver.fixtures import NODEMETRIC_CRD, NODESLO_CRD

NODEMETRIC: dict[str, Any] = {
    "apiVersion": "slo.koordinator.sh/v1alpha1",
    "kind": "NodeMetric",
    "metadata": {"name": "node-1"},
    "spec": {
        "metricCollectPolicy": {
            "aggregateDurationSeconds": 300,
            "reportIntervalSeconds": 60,
            "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
            "nodeMemoryCollectPolicy": "usageWithoutPageCache",
        }
    },
    "status": {
        "updateTime": "2026-01-01T00:00:00Z",
        "nodeMetric": {
            "nodeUsage": {"resources": {"cpu": "7350m", "memory": "20Gi"}},
            "aggregatedNodeUsages": [
                {
                    "duration": "5m0s",
                    "usage": {
                        p: {"resources": {"cpu": "7200m", "memory": "20Gi"}}
                        for p in ("avg", "p50", "p90", "p95", "p99")
                    },
                }
            ],
            "systemUsage": {"resources": {"cpu": "500m", "memory": "2Gi"}},
            "aggregatedSystemUsages": [],
            "numaUsages": [
                {
                    "numaNodeID": 0,
                    "nodeUsage": {"resources": {"cpu": "4", "memory": "10Gi"}},
                    "systemUsage": {"resources": {"cpu": "250m", "memory": "1Gi"}},
                }
            ],
        },
        "podsMetric": [
            {
                "namespace": "default",
                "name": "web-0",
                "priority": "koord-prod",
                "qos": "LS",
                "podUsage": {"resources": {"cpu": "1200m", "memory": "2Gi"}},
            }
        ],
        "hostApplicationMetric": [
            {"name": "nginx", "priority": "koord-prod", "qos": "LS", "usage": {"resources": {"cpu": "100m"}}}
        ],
        "prodReclaimableMetric": {"resource": {"resources": {"cpu": "3", "memory": "8Gi"}}},
        "prodPeakMetric": {"resource": {"resources": {"cpu": 9, "memory": "30Gi"}}},
    },
}

NODESLO: dict[str, Any] = {
    "apiVersion": "slo.koordinator.sh/v1alpha1",
    "kind": "NodeSLO",
    "metadata": {"name": "node-1"},
    "spec": {
        "resourceUsedThresholdWithBE": {
            "enable": True,
            "cpuSuppressThresholdPercent": 65,
            "cpuSuppressPolicy": "cpuset",
            "cpuSuppressMinPercent": 10,
            "memoryEvictThresholdPercent": 70,
            "memoryEvictLowerPercent": 65,
            "memoryAllocatableEvictThresholdPercent": 110,
            "cpuEvictBESatisfactionLowerPercent": 60,
            "cpuEvictBESatisfactionUpperPercent": 80,
            "cpuEvictBEUsageThresholdPercent": 90,
            "cpuEvictTimeWindowSeconds": 30,
            "cpuEvictPolicy": "evictByRealLimit",
        },
        "resourceQOSStrategy": {
            "policies": {"cpuPolicy": "groupIdentity", "netQOSPolicy": "tc"},
            "lsrClass": {
                "cpuQOS": {"enable": True, "groupIdentity": 2},
                "resctrlQOS": {"enable": True, "catRangeStartPercent": 0, "catRangeEndPercent": 100},
                "memoryQOS": {"enable": True, "wmarkRatio": 95, "wmarkScalePermill": 20, "wmarkMinAdj": -25},
            },
            "beClass": {
                "cpuQOS": {"enable": True, "groupIdentity": -1},
                "memoryQOS": {"enable": True, "wmarkMinAdj": 50},
                "blkioQOS": {
                    "enable": True,
                    "blocks": [{"name": "/dev/vdb", "type": "device", "ioCfg": {"readBPS": 104857600}}],
                },
                "networkQOS": {"enable": True, "ingressLimit": "50M", "egressRequest": 100},
            },
            "cgroupRoot": {"blkioQOS": {"enable": False}},
        },
        "cpuBurstStrategy": {
            "policy": "auto",
            "cpuBurstPercent": 1000,
            "cfsQuotaBurstPercent": 300,
            "cfsQuotaBurstPeriodSeconds": -1,
            "sharePoolThresholdPercent": 50,
        },
        "systemStrategy": {
            "minFreeKbytesFactor": 100,
            "watermarkScaleFactor": 150,
            "totalNetworkBandwidth": "0",
        },
        "extensions": {"anything": {"goes": [1, 2]}},
        "hostApplications": [
            {"name": "nginx", "priority": "koord-prod", "qos": "LS", "cgroupPath": {"base": "CgroupRoot"}}
        ],
    },
}


def test_reference_examples_are_valid() -> None:
    assert crdschema.errors(NODEMETRIC, NODEMETRIC_CRD) == []
    assert crdschema.errors(NODESLO, NODESLO_CRD) == []


def test_crds_are_cluster_scoped_with_status_subresource() -> None:
    for path, kind in ((NODEMETRIC_CRD, "NodeMetric"), (NODESLO_CRD, "NodeSLO")):
        doc = crdschema.load_crd(path)
        assert doc["apiVersion"] == "apiextensions.k8s.io/v1"
        assert doc["spec"]["scope"] == "Cluster"
        assert doc["spec"]["names"]["kind"] == kind
        (version,) = doc["spec"]["versions"]
        assert version["subresources"] == {"status": {}}
        assert version["served"] and version["storage"]


@pytest.mark.parametrize("good", ["1", "250m", "1.5", "20Gi", "1e3", "+3", ".5", "100M", 4])
def test_quantities_accepted(good: object) -> None:
    status = {"nodeMetric": {"nodeUsage": {"resources": {"cpu": good}}}}
    assert crdschema.errors(status, NODEMETRIC_CRD, "status") == []


@pytest.mark.parametrize("bad", ["lots", "1.5 cores", "20GB", "", 1.5, True, None])
def test_quantities_refused(bad: object) -> None:
    status = {"nodeMetric": {"nodeUsage": {"resources": {"cpu": bad}}}}
    causes = crdschema.errors(status, NODEMETRIC_CRD, "status")
    assert [field for field, _ in causes] == ["status.nodeMetric.nodeUsage.resources.cpu"]


def test_unknown_fields_refused_only_in_strict_mode() -> None:
    obj = copy.deepcopy(NODEMETRIC)
    obj["status"]["nodeMetric"]["nodeUsage"]["cpuTypo"] = 1
    assert crdschema.errors(obj, NODEMETRIC_CRD, strict=False) == []
    with pytest.raises(crdschema.CRDValidationError) as err:
        crdschema.validate(obj, NODEMETRIC_CRD)
    assert err.value.causes[0][0] == "status.nodeMetric.nodeUsage"
    assert "cpuTypo" in str(err.value)


def test_preserve_unknown_fields_keeps_anything() -> None:
    obj = copy.deepcopy(NODESLO)
    obj["spec"]["extensions"] = {"deep": {"x": [{"y": None}]}}
    assert crdschema.errors(obj, NODESLO_CRD) == []
    assert crdschema.prune(obj, NODESLO_CRD)["spec"]["extensions"] == {"deep": {"x": [{"y": None}]}}


@pytest.mark.parametrize(
    ("path", "value"),
    [
        # Koordinator's own ranges (its CRD has no enums in NodeSLO: those values are the agent's to refuse)
        (("resourceQOSStrategy", "beClass", "memoryQOS", "wmarkMinAdj"), -26),
        (("resourceQOSStrategy", "beClass", "resctrlQOS", "mbaPercent"), 101),
        (("resourceUsedThresholdWithBE", "memoryEvictThresholdPercent"), 101),
        (("cpuBurstStrategy", "cpuBurstPercent"), 10001),
        (("resourceUsedThresholdWithBE", "enable"), "yes"),
    ],
)
def test_nodeslo_ranges_and_enums(path: tuple[str, ...], value: object) -> None:
    obj = copy.deepcopy(NODESLO)
    node = obj["spec"]
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    causes = crdschema.errors(obj, NODESLO_CRD)
    assert [field for field, _ in causes] == ["spec." + ".".join(path)]


def test_subresource_validates_that_part_alone() -> None:
    assert crdschema.errors(NODEMETRIC["status"], NODEMETRIC_CRD, "status") == []
    causes = crdschema.errors({"updateTime": 5}, NODEMETRIC_CRD, "status")
    assert [field for field, _ in causes] == ["status.updateTime"]
    with pytest.raises(ValueError, match="no top-level property"):
        crdschema.errors({}, NODEMETRIC_CRD, "scale")


def _crd(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": "Thing", "plural": "things"},
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
            ],
        },
    }


def test_nullable_admits_null_and_prune_drops_non_nullable_nulls() -> None:
    crd = _crd(
        {
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "a": {"type": "string", "nullable": True},
                        "b": {"type": "string"},
                        "c": {"x-kubernetes-int-or-string": True, "nullable": True},
                    },
                }
            },
        }
    )
    assert crdschema.errors({"spec": {"a": None, "c": None}}, crd) == []
    assert [f for f, _ in crdschema.errors({"spec": {"b": None}}, crd)] == ["spec.b"]
    pruned = crdschema.prune({"spec": {"a": None, "b": None, "zz": 1}, "metadata": {"name": "x"}}, crd)
    assert pruned == {"spec": {"a": None}, "metadata": {"name": "x"}}


def test_int_or_string_without_pattern_takes_any_string_but_no_float() -> None:
    crd = _crd({"type": "object", "properties": {"v": {"x-kubernetes-int-or-string": True}}})
    assert crdschema.errors({"v": "50%"}, crd) == []
    assert crdschema.errors({"v": 3}, crd) == []
    assert crdschema.errors({"v": 3.5}, crd) != []


def test_not_a_crd_file_is_refused(tmp_path: Any) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text("kind: ConfigMap\n")
    with pytest.raises(ValueError, match="not a CustomResourceDefinition"):
        crdschema.validate({}, path)
