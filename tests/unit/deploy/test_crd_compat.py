"""Our NodeSLO and NodeMetric CRDs against Koordinator's.

Koordinator's constraints come from the table in ``tests/koord_slo_facts.py`` (v1.8.0 and main). Every
object generated at that table's edges must pass our CRDs, the table must reach every field of ours, the
NodeMetric status the agent writes must pass Koordinator's v1.8 schema (after kube-apiserver's pruning of
fields v1.8 lacks), and objects shaped like Koordinator's documented examples must pass ours and be read
by the agent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordshared.apis.configuration.slocontroller import render_spec
from koordshared.apis.slo.nodemetric import parse_status, to_status
from koordshared.apis.slo.nodeslo import build, default_spec, merge
from tests import crdschema
from tests.apiserver.fixtures import NODEMETRIC_CRD, NODESLO_CRD
from tests.koord_slo_edges import crd, edge_objects, paths
from tests.koord_slo_facts import MAIN, TABLE, V18, VERSIONS
from tests.support.jsonpath import at
from tests.unit.apiserver.test_crdschema import NODEMETRIC, NODESLO
from tests.unit.koordlet.statesinformer.test_nodemetric_shape import full_status

OURS: dict[str, Path] = {"nodeslos": NODESLO_CRD, "nodemetrics": NODEMETRIC_CRD}
# Fields our CRDs have that Koordinator's lack (accepting more is allowed; each one is a decision).
OUR_EXTRAS = {"nodemetrics": {"status.extensions"}, "nodeslos": set()}
# What kube-apiserver drops from the agent's status when Koordinator v1.8's CRD is installed.
MAIN_ONLY_STATUS = {("nodeMetric", "numaUsages"), ("prodPeakMetric",)}

CASES = [(plural, part, version) for plural in TABLE for part in ("spec", "status") for version in VERSIONS]


@pytest.mark.parametrize(("plural", "part", "version"), CASES)
def test_every_object_koordinators_crd_accepts_passes_ours(plural: str, part: str, version: str) -> None:
    theirs = crd(plural, version)
    refused = []
    count = 0
    for name, obj in edge_objects(TABLE[plural][part], version):
        assert crdschema.errors(obj, theirs, part) == [], f"generator: {name} is not valid for Koordinator"
        refused += [
            f"{name}: {field}: {message[:160]}"
            for field, message in crdschema.errors(obj, OURS[plural], part)
        ]
        count += 1
    assert count >= 3
    listing = "\n".join(refused[:20])
    assert refused == [], f"our {plural} CRD refuses what Koordinator {version} accepts:\n{listing}"


def _our_paths(node: dict[str, Any], prefix: str) -> Iterator[str]:
    yield prefix
    for key, sub in node.get("properties", {}).items():
        yield from _our_paths(sub, f"{prefix}.{key}")
    if isinstance(node.get("items"), dict):
        yield from _our_paths(node["items"], f"{prefix}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _our_paths(node["additionalProperties"], f"{prefix}.*")


@pytest.mark.parametrize("plural", TABLE)
def test_the_table_reaches_every_field_of_ours(plural: str) -> None:
    """A field of ours missing from the table would go untested: the table must stay complete."""
    root = crdschema.version_schema(OURS[plural])["properties"]
    ours = {p for part in ("spec", "status") for p in _our_paths(root[part], part)}
    table = {p for part, node in TABLE[plural].items() for p in paths(node, MAIN, part)}
    assert table - ours == set()
    assert ours - table == OUR_EXTRAS[plural]
    assert len(table) > 300  # every field, not a sample


def test_page_cache_limit_enabled_is_an_integer_as_in_koordinator() -> None:
    spec = {"systemStrategy": {"pageCacheLimitEnabled": 1}}
    assert crdschema.errors(spec, NODESLO_CRD, "spec") == []
    assert crdschema.errors({"systemStrategy": {"pageCacheLimitEnabled": True}}, NODESLO_CRD, "spec") != []


@pytest.mark.parametrize("version", VERSIONS)
def test_the_default_node_slo_koord_manager_writes_passes_both(version: str) -> None:
    spec = render_spec({}, {}, {})  # what koord-manager writes for a node with no slo-controller-config
    assert default_spec()["resourceUsedThresholdWithBE"] == spec["resourceUsedThresholdWithBE"]
    assert crdschema.errors(spec, crd("nodeslos", version), "spec") == []
    assert crdschema.errors(spec, NODESLO_CRD, "spec") == []


def test_the_status_we_write_passes_koordinators_schema() -> None:
    status = to_status(full_status())
    assert crdschema.errors(status, crd("nodemetrics", MAIN), "status") == []
    v18 = crd("nodemetrics", V18)
    pruned = crdschema.prune(status, v18, "status")
    assert crdschema.errors(pruned, v18, "status") == []
    # pruning drops only the fields v1.8 lacks: everything else the agent writes is v1.8's
    expected = {k: dict(v) if isinstance(v, dict) else v for k, v in status.items()}
    for path in MAIN_ONLY_STATUS:
        parent = expected
        for key in path[:-1]:
            parent = parent[key]
        assert path[-1] in parent, f"the full status should carry {'.'.join(path)}"
        del parent[path[-1]]
    assert pruned == expected


# ---- objects shaped like Koordinator's documented examples --------------------------------------------
# test_crdschema's reference objects, completed: every QoS strategy in every class, devices in the usages.


def _qos_class(group_identity: int, enable: bool) -> dict[str, Any]:
    return {
        "cpuQOS": {"enable": enable, "groupIdentity": group_identity, "schedIdle": 0, "coreExpeller": False},
        "memoryQOS": {
            "enable": enable,
            **dict.fromkeys(("minLimitPercent", "lowLimitPercent", "throttlingPercent", "priority"), 0),
            "wmarkRatio": 95 if enable else 0,
            "wmarkScalePermill": 20,
            "wmarkMinAdj": -25 if group_identity > 0 else 50,
        },
        "resctrlQOS": {
            "enable": enable,
            "catRangeStartPercent": 0,
            "catRangeEndPercent": 100,
            "mbaPercent": 100,
        },
        "blkioQOS": {
            "enable": enable,
            "blocks": [
                {"name": "/dev/vdb", "type": "device", "ioCfg": {"readIOPS": 1024, "ioWeightPercent": 60}}
            ],
        },
        "networkQOS": {"enable": False, "ingressRequest": "0", "ingressLimit": "100M", "egressLimit": "50%"},
    }


CLASSES = {"lsrClass": (2, True), "lsClass": (2, True), "beClass": (-1, True), "systemClass": (0, False)}
NODESLO_EXAMPLE = merge(
    NODESLO,
    {
        "spec": {
            "resourceQOSStrategy": {k: _qos_class(*v) for k, v in CLASSES.items()}
            | {"cgroupRoot": _qos_class(0, False)},
            "systemStrategy": {"memcgReapBackGround": 0, "schedGroupIdentityEnabled": 1},
        }
    },
)


def _gpu(minor: int) -> dict[str, Any]:
    return {
        "type": "gpu",
        "id": f"GPU-{minor:08x}-0000-0000-0000-000000000000",
        "minor": minor,
        "health": True,
        "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "16Gi"},
        "topology": {"socketID": 0, "nodeID": 0, "pcieID": "pci0000:3a", "busID": "0000:3b:00.0"},
        "conditions": [
            {
                "type": "Healthy",
                "status": "True",
                "reason": "DriverReady",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }


NODEMETRIC_EXAMPLE = merge(
    NODEMETRIC,
    {
        "status": {
            "nodeMetric": {"nodeUsage": {"devices": [_gpu(0), _gpu(1)]}},
            "podsMetric": [
                merge(NODEMETRIC["status"]["podsMetric"][0], {"podUsage": {"devices": [_gpu(0)]}}),
                {
                    "namespace": "batch",
                    "name": "spark-1",
                    "priority": "koord-batch",
                    "qos": "BE",
                    "podUsage": {"resources": {"cpu": "3500m", "memory": "8Gi"}},
                },
            ],
        }
    },
)


@pytest.mark.parametrize("example", [NODESLO_EXAMPLE, NODEMETRIC_EXAMPLE], ids=["nodeslo", "nodemetric"])
def test_koordinator_shaped_examples_pass_both_and_the_agent_reads_them(example: dict[str, Any]) -> None:
    plural = f"{example['kind'].lower()}s"
    assert crdschema.errors(example, crd(plural, MAIN)) == [], "the example is not valid for Koordinator"
    v18 = crd(plural, V18)
    assert crdschema.errors(crdschema.prune(example, v18), v18) == []
    assert crdschema.errors(example, OURS[plural]) == []
    if plural == "nodeslos":
        slo = build(example["spec"])
        assert slo.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 65
        assert at(slo.resource_qos_strategy, "systemClass", "resctrlQOS", "mbaPercent") == 100
        assert slo.host_applications[0].cgroup_base == "CgroupRoot"
    else:
        status = parse_status(example["status"])
        assert status.problems == ()
        assert status.node_usage is not None and status.node_usage.cpu_milli == 7350
        assert [p.name for p in status.pods_metric] == ["web-0", "spark-1"]
