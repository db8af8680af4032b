"""Our NodeSLO and NodeMetric CRDs against Koordinator's (issue 16 point 13).

``tests/fixtures/koordinator_crds`` holds the type structure of Koordinator's CRDs (v1.8.0 chart and the
main branch's ``config/crd/bases``), descriptions left out: every object Koordinator's accept must pass
ours, and the status the agent writes must pass Koordinator's v1.8 schema (after kube-apiserver's pruning
of fields that schema does not know, such as ``numaUsages``). Objects are generated from Koordinator's
schema at its edges: every field present, integers at its minimum and maximum (or far out where it has
none), strings at each enum value (or any text where it has no enum).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordlet.schema.nodemetric import to_status
from koordlet.schema.nodeslo import default_spec
from koordlet.schema.sloconfig import render_spec
from tests import crdschema
from tests.apiserver.fixtures import NODEMETRIC_CRD, NODESLO_CRD
from tests.unit.statesinformer.test_nodemetric_shape import full_status

DIGESTS = Path(__file__).resolve().parents[2] / "fixtures" / "koordinator_crds"
QUANTITY = "1500m"


def koordinator_crd(name: str) -> dict[str, Any]:
    doc = json.loads((DIGESTS / f"{name}.json").read_text())
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{doc['kind'].lower()}s.{doc['group']}"},
        "spec": {
            "versions": [
                {
                    "name": doc["version"],
                    "storage": True,
                    "schema": {"openAPIV3Schema": doc["openAPIV3Schema"]},
                }
            ]
        },
    }


def sample(schema: dict[str, Any], edge: str) -> Any:
    """An instance of ``schema`` at ``edge`` (``low``/``high``): Koordinator accepts it."""
    if schema.get("x-kubernetes-int-or-string"):
        return 7 if edge == "low" else ("10Gi" if "pattern" in schema else "50%")
    if "enum" in schema:
        return schema["enum"][0 if edge == "low" else -1]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties")
        if props:
            return {k: sample(v, edge) for k, v in props.items()}
        extra = schema.get("additionalProperties")
        return {"k": sample(extra, edge)} if isinstance(extra, dict) else {}
    if kind == "array":
        return [sample(schema["items"], edge)]
    if kind == "integer":
        return schema.get("minimum", -7) if edge == "low" else schema.get("maximum", 10**9)
    if kind == "boolean":
        return edge == "high"
    if kind == "string":
        if schema.get("format") == "date-time":
            return "2026-01-01T00:00:00Z"
        if "pattern" in schema:  # a quantity, or a condition's reason/type (CamelCase)
            return QUANTITY if "KMGTPE" in schema["pattern"] else "Ready"
        return "any-value-koordinator-accepts" if edge == "high" else ""
    if kind == "number":
        return 0.5
    return {}


def objects(crd: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    root = crdschema.version_schema(crd)
    for part in ("spec", "status"):
        if part in root["properties"]:
            for edge in ("low", "high"):
                yield f"{part}/{edge}", (part, sample(root["properties"][part], edge))


CASES = [
    ("v1.8.0_nodeslos", NODESLO_CRD),
    ("head_nodeslos", NODESLO_CRD),
    ("v1.8.0_nodemetrics", NODEMETRIC_CRD),
    ("head_nodemetrics", NODEMETRIC_CRD),
]


@pytest.mark.parametrize(("digest", "ours"), CASES)
def test_every_object_koordinators_crd_accepts_passes_ours(digest: str, ours: Path) -> None:
    theirs = koordinator_crd(digest)
    checked = 0
    for name, (part, obj) in objects(theirs):
        assert crdschema.errors(obj, theirs, part) == [], f"generator: {name} is not valid for Koordinator"
        assert crdschema.errors(obj, ours, part) == [], f"{digest} {name}"
        checked += 1
    assert checked >= 2


def test_page_cache_limit_enabled_is_an_integer_as_in_koordinator() -> None:
    spec = {"systemStrategy": {"pageCacheLimitEnabled": 1}}
    assert crdschema.errors(spec, NODESLO_CRD, "spec") == []
    assert crdschema.errors({"systemStrategy": {"pageCacheLimitEnabled": True}}, NODESLO_CRD, "spec") != []


@pytest.mark.parametrize("digest", ["v1.8.0_nodeslos", "head_nodeslos"])
def test_the_default_node_slo_koord_manager_writes_passes_both(digest: str) -> None:
    spec = render_spec({}, {}, {})  # what koord-manager writes for a node with no slo-controller-config
    assert default_spec()["resourceUsedThresholdWithBE"] == spec["resourceUsedThresholdWithBE"]
    assert crdschema.errors(spec, koordinator_crd(digest), "spec") == []
    assert crdschema.errors(spec, NODESLO_CRD, "spec") == []


@pytest.mark.parametrize("digest", ["v1.8.0_nodemetrics", "head_nodemetrics"])
def test_the_status_we_write_passes_koordinators_schema(digest: str) -> None:
    theirs = koordinator_crd(digest)
    status = to_status(full_status())
    assert crdschema.errors(crdschema.prune(status, theirs, "status"), theirs, "status") == []
