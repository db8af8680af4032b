"""The OpenAPI documents and Table output, read as clients read them: the v3 index and a group version's
document (what ``kubectl apply`` and ``kubectl explain`` use), the v2 document in JSON and in gnostic
protobuf, Tables for lists, single objects and watches, CRD printer columns, discovery categories."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.apiserver import APIServer, protobuf
from tests.apiserver.fixtures import DEFAULT_CRDS
from tests.unit.apiserver.helpers import connect, pod

# what kubectl get sends
TABLE = ",".join(
    (
        "application/json;as=Table;v=v1;g=meta.k8s.io",
        "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
        "application/json",
    )
)
WIDGETS = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "categories": ["all"]},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "description": "What the widget should be.",
                                "properties": {"size": {"type": "integer"}, "color": {"type": "string"}},
                            }
                        },
                    }
                },
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
            }
        ],
    },
}


@pytest.fixture(scope="module")
def server() -> Iterator[APIServer]:
    with APIServer(crds=[*DEFAULT_CRDS, WIDGETS]) as api:
        yield api


def _as_bytes(value: int | bytes) -> bytes:
    """A length-delimited field's bytes (a varint field here is a wrong message)."""
    assert isinstance(value, bytes), value
    return value


def _get(server: APIServer, path: str, accept: str = "application/json") -> tuple[int, bytes, Any]:
    conn = connect(server)
    try:
        conn.request("GET", path, headers={"Accept": accept})
        resp = conn.getresponse()
        return resp.status, resp.read(), resp.headers
    finally:
        conn.close()


def _doc(server: APIServer, gv: str) -> dict[str, Any]:
    code, data, _ = _get(server, "/openapi/v3")
    assert code == 200
    url = json.loads(data)["paths"][gv]["serverRelativeURL"]
    assert "?hash=" in url
    code, data, _ = _get(server, url)
    assert code == 200
    doc: dict[str, Any] = json.loads(data)
    return doc


def _schema_of(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [
        s
        for s in doc["components"]["schemas"].values()
        if any(g["kind"] == kind for g in s.get("x-kubernetes-group-version-kind", ()))
    ]
    assert len(found) == 1, kind
    return found[0]


def test_v3_document_of_a_built_in_group_version(server: APIServer) -> None:
    """What kubectl reads: the kind's schema marked with its GVK, the patch tags of its lists (the same
    ones the server merges by), a PATCH operation that offers strategic merge and takes fieldValidation."""
    doc = _doc(server, "apis/apps/v1")
    assert doc["openapi"].startswith("3.")
    deployment = _schema_of(doc, "Deployment")
    assert {"apiVersion", "kind", "metadata", "spec", "status"} <= set(deployment["properties"])
    schemas = doc["components"]["schemas"]
    containers = next(s for name, s in schemas.items() if name.endswith(".PodSpec"))["properties"][
        "containers"
    ]
    assert (containers["x-kubernetes-patch-strategy"], containers["x-kubernetes-patch-merge-key"]) == (
        "merge",
        "name",
    )
    strategy = next(s for name, s in schemas.items() if name.endswith(".DeploymentSpec"))["properties"][
        "strategy"
    ]
    assert strategy["x-kubernetes-patch-strategy"] == "retainKeys"
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "apps",
        "version": "v1",
        "kind": "Deployment",
    }
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    assert "application/apply-patch+yaml" not in patch["requestBody"]["content"]  # not implemented here
    assert {p["name"] for p in patch["parameters"]} >= {"fieldValidation", "dryRun", "fieldManager"}


def test_v3_document_of_a_custom_resource(server: APIServer) -> None:
    """A CRD's document: its schema with ObjectMeta as metadata, no strategic merge patch."""
    doc = _doc(server, "apis/example.com/v1")
    widget = _schema_of(doc, "Widget")
    assert widget["properties"]["spec"]["description"] == "What the widget should be."
    assert widget["properties"]["metadata"]["$ref"].endswith(".ObjectMeta")
    patch = doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"]
    assert set(patch["requestBody"]["content"]) == {
        "application/json-patch+json",
        "application/merge-patch+json",
    }


def test_v2_document_in_json_and_in_protobuf(server: APIServer) -> None:
    """``/openapi/v2`` answers JSON, or the gnostic ``openapi.v2.Document`` for client-go's Accept."""
    code, data, _ = _get(server, "/openapi/v2")
    swagger = json.loads(data)
    assert code == 200 and swagger["swagger"] == "2.0"
    assert any(name.endswith(".Pod") for name in swagger["definitions"])
    code, data, headers = _get(
        server, "/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
    )
    assert (
        code == 200
        and headers["Content-Type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    )
    fields = {number: value for number, _, value in protobuf.wire_fields(data)}
    assert fields[1] == b"2.0"  # Document.swagger
    # Definitions.additional_properties
    definitions = [v for n, _, v in protobuf.wire_fields(_as_bytes(fields[9]))]
    names = {
        _as_bytes(dict((n, v) for n, _, v in protobuf.wire_fields(d))[1])
        for d in definitions
        if isinstance(d, bytes)
    }
    assert any(name.endswith(b".Pod") for name in names) and b"com.example.v1.Widget" in names


def test_documents_follow_the_crds(server: APIServer) -> None:
    """Creating a CRD adds its group version to the index (and its hash changes nothing else)."""
    before = json.loads(_get(server, "/openapi/v3")[1])["paths"]
    gadgets = json.loads(json.dumps(WIDGETS).replace("widget", "gadget").replace("Widget", "Gadget"))
    gadgets["spec"]["group"] = "gadgets.example.com"
    gadgets["metadata"]["name"] = "gadgets.gadgets.example.com"
    server.register_crd(gadgets)
    after = json.loads(_get(server, "/openapi/v3")[1])["paths"]
    assert set(after) - set(before) == {"apis/gadgets.example.com/v1"}
    assert after["api/v1"] == before["api/v1"]


def test_tables_for_lists_objects_and_custom_resources(server: APIServer) -> None:
    """``as=Table``: the printer's columns (priority 1 for -o wide), cells per row and the object's
    metadata as a PartialObjectMetadata; a CRD's additionalPrinterColumns with a date as an age."""
    server.store.create("pods", {**pod("t1", "node-t"), "status": {"phase": "Running", "podIP": "10.0.0.7"}})
    code, data, _ = _get(server, "/api/v1/namespaces/default/pods", TABLE)
    table = json.loads(data)
    assert (code, table["kind"], table["apiVersion"]) == (200, "Table", "meta.k8s.io/v1")
    columns = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
    assert columns[:5] == [("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0)]
    assert ("IP", 1) in columns and ("Node", 1) in columns
    row = next(r for r in table["rows"] if r["cells"][0] == "t1")
    cells = dict(zip([c for c, _ in columns], row["cells"], strict=True))
    assert (cells["Status"], cells["IP"], cells["Node"], cells["Ready"]) == (
        "Running",
        "10.0.0.7",
        "node-t",
        "0/1",
    )
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "t1"
    _, data, _ = _get(server, "/api/v1/namespaces/default/pods/t1?includeObject=None", TABLE)
    assert "object" not in json.loads(data)["rows"][0]
    server.store.create(
        "widgets.example.com",
        {"metadata": {"name": "w1", "namespace": "default"}, "spec": {"size": 3, "color": "red"}},
    )
    _, data, _ = _get(server, "/apis/example.com/v1/namespaces/default/widgets", TABLE)
    widgets = json.loads(data)
    assert [(c["name"], c["type"], c["priority"]) for c in widgets["columnDefinitions"]] == [
        ("Name", "string", 0),
        ("Size", "integer", 0),
        ("Color", "string", 1),
        ("Age", "date", 0),
    ]
    name, size, color, age = widgets["rows"][0]["cells"]
    assert (name, size, color) == ("w1", 3, "red") and age.endswith("s")
    _, data, _ = _get(server, "/api/v1/namespaces/default/pods", "application/json")
    assert json.loads(data)["kind"] == "PodList"  # a client that asks for JSON gets JSON


def test_watch_as_table_sends_columns_once(server: APIServer) -> None:
    server.store.create("configmaps", {"metadata": {"name": "w-a", "namespace": "default"}})
    server.store.create("configmaps", {"metadata": {"name": "w-b", "namespace": "default"}})
    code, data, _ = _get(server, "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1", TABLE)
    events = [json.loads(line) for line in data.splitlines() if line.strip()]
    assert code == 200 and len(events) >= 2
    assert [e["object"]["kind"] for e in events] == ["Table"] * len(events)
    assert "columnDefinitions" in events[0]["object"] and "columnDefinitions" not in events[1]["object"]


def test_discovery_categories_and_subresource_kinds(server: APIServer) -> None:
    """``kubectl get all`` expands the "all" category from discovery; ``pods/eviction`` is a
    ``policy/v1`` Eviction (kubectl drain evicts only when discovery says so)."""
    from kubernetes import client

    api = client.ApiClient(server.client_config())
    core = {r.name: r for r in client.CoreV1Api(api).get_api_resources().resources}
    assert core["pods"].categories == ["all"] and core["services"].categories == ["all"]
    eviction = core["pods/eviction"]
    assert (eviction.group, eviction.version, eviction.kind) == ("policy", "v1", "Eviction")
    token = core["serviceaccounts/token"]
    assert (token.group, token.kind) == ("authentication.k8s.io", "TokenRequest")
    apps = {r.name: r for r in client.AppsV1Api(api).get_api_resources().resources}
    assert apps["deployments"].categories == ["all"] and apps["deployments/scale"].kind == "Scale"
    widgets = {
        r.name: r for r in client.CustomObjectsApi(api).get_api_resources("example.com", "v1").resources
    }
    assert widgets["widgets"].categories == ["all"]
