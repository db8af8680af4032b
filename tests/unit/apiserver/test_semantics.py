"""Answers the server used to get wrong, through the official client: boolean field selectors, default
tolerations and priority on pod updates, and field validation of built-in types."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.apiserver import APIServer
from tests.apiserver.fixtures import DEFAULT_CRDS
from tests.unit.apiserver.helpers import connect, error_status, pod


@pytest.fixture(scope="module")
def server() -> Iterator[APIServer]:
    with APIServer(crds=DEFAULT_CRDS) as api:
        yield api


def _core(server: APIServer) -> Any:
    from kubernetes import client

    return client.CoreV1Api(client.ApiClient(server.client_config()))


def test_boolean_field_selectors_treat_unset_as_false(server: APIServer) -> None:
    """``spec.unschedulable`` and ``spec.hostNetwork`` are Go bools: the field set holds
    ``strconv.FormatBool`` of them, so an object that leaves them out matches ``=false``."""
    core = _core(server)
    for name, unschedulable in (("unset", None), ("no", False), ("yes", True)):
        spec = {} if unschedulable is None else {"unschedulable": unschedulable}
        server.store.create("nodes", {"metadata": {"name": f"sel-{name}"}, "spec": spec})

    def nodes(selector: str) -> set[str]:
        found = core.list_node(field_selector=selector).items
        return {n.metadata.name for n in found if n.metadata.name.startswith("sel-")}

    assert nodes("spec.unschedulable=false") == {"sel-unset", "sel-no"}
    assert nodes("spec.unschedulable!=true") == {"sel-unset", "sel-no"}
    assert nodes("spec.unschedulable=true") == {"sel-yes"}
    server.store.create("pods", pod("plain", namespace="default"))
    host = pod("host", namespace="default")
    host["spec"]["hostNetwork"] = True
    server.store.create("pods", host)
    names = {
        p.metadata.name
        for p in core.list_namespaced_pod("default", field_selector="spec.hostNetwork=false").items
    }
    assert "plain" in names and "host" not in names


def test_default_tolerations_and_priority_survive_an_update(server: APIServer) -> None:
    """DefaultTolerationSeconds admits updates too: a patch that replaces the tolerations (what
    ``kubectl apply`` sends when a manifest's tolerations change) keeps the defaults, so pod update
    validation, which allows only added tolerations, accepts it. Priority keeps the resolved priority
    when a PUT leaves it out."""
    from kubernetes.client.exceptions import ApiException

    core = _core(server)
    body = pod("tolerant", namespace="default")
    mine = {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
    body["spec"]["tolerations"] = [mine]
    created = core.create_namespaced_pod("default", body)
    defaults = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
    assert {t.key for t in created.spec.tolerations} == {"dedicated", *defaults}
    gpu = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    patched = core.patch_namespaced_pod("tolerant", "default", {"spec": {"tolerations": [mine, gpu]}})
    assert [t.key for t in patched.spec.tolerations][:2] == ["dedicated", "gpu"]
    assert {t.key for t in patched.spec.tolerations} == {"dedicated", "gpu", *defaults}
    with pytest.raises(ApiException) as err:  # removing one of its own is still refused
        core.patch_namespaced_pod("tolerant", "default", {"spec": {"tolerations": [gpu]}})
    assert error_status(err)[0] == 422
    current = server.store.get("pods", "tolerant", "default")
    del current["spec"]["priority"], current["spec"]["preemptionPolicy"]
    replaced = core.replace_namespaced_pod("tolerant", "default", current)
    assert (replaced.spec.priority, replaced.spec.preemption_policy) == (0, "PreemptLowerPriority")


def _post(server: APIServer, path: str, doc: dict[str, Any]) -> tuple[int, Any, list[str]]:
    conn = connect(server)
    try:
        conn.request("POST", path, body=json.dumps(doc), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read()), resp.headers.get_all("Warning") or []
    finally:
        conn.close()


def test_field_validation_of_built_in_types(server: APIServer) -> None:
    """Unknown fields of a built-in type are dropped as Go's decoder drops them; fieldValidation=Strict
    refuses them (400 ``strict decoding error`` with every path), Warn (the default) says so in
    ``Warning`` headers, Ignore says nothing. A value of the wrong JSON type does not decode (400)."""
    body = pod("typo", namespace="default")
    body["spec"]["containers"][0]["imagee"] = "x"
    body["spec"]["bogus"] = 1
    base = "/api/v1/namespaces/default/pods"
    code, status_, _ = _post(server, f"{base}?fieldValidation=Strict", body)
    assert code == 400
    assert status_["message"] == (
        'strict decoding error: unknown field "spec.bogus", unknown field "spec.containers[0].imagee"'
    ) or status_["message"] == (
        'strict decoding error: unknown field "spec.containers[0].imagee", unknown field "spec.bogus"'
    )
    code, created, warnings = _post(server, base, body)
    assert code == 201 and "imagee" not in created["spec"]["containers"][0] and "bogus" not in created["spec"]
    assert sorted(warnings) == [
        '299 - "unknown field \\"spec.bogus\\""',
        '299 - "unknown field \\"spec.containers[0].imagee\\""',
    ]
    body["metadata"]["name"] = "typo-quiet"
    code, _, warnings = _post(server, f"{base}?fieldValidation=Ignore", body)
    assert (code, warnings) == (201, [])
    code, status_, _ = _post(server, f"{base}?fieldValidation=Sometimes", body)
    assert (code, status_["reason"]) == (422, "Invalid")
    wrong = pod("wrong", namespace="default")
    wrong["spec"]["containers"] = {"name": "c"}
    code, status_, _ = _post(server, base, wrong)
    assert code == 400 and "spec.containers" in status_["message"]


def test_field_validation_of_custom_resources_warns_too(server: APIServer) -> None:
    """Custom resources are pruned against their schema; under Warn the pruned fields are warnings."""
    doc = {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": "warned", "bogus": 1},
        "spec": {"typo": 1},
    }
    code, created, warnings = _post(server, "/apis/slo.koordinator.sh/v1alpha1/nodemetrics", doc)
    assert code == 201 and created["spec"] == {} and "bogus" not in created["metadata"]
    assert sorted(warnings) == [
        '299 - "unknown field \\"metadata.bogus\\""',
        '299 - "unknown field \\"spec.typo\\""',
    ]
