"""Where a run against a real kube-apiserver (v1.34 to v1.36) showed the test API server answering
otherwise, the server now answers as kube-apiserver does; each test names the upstream code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.apiserver import APIServer
from tests.unit.apiserver.helpers import new_watch, nodemetric, pod, raw_call
from tests.unit.apiserver.kubectl import Kubectl, table

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def test_list_items_of_built_in_types_name_no_kind(api_server: APIServer) -> None:
    """A typed list's items are encoded without TypeMeta (apimachinery ``unstructured/helpers.go``
    ``decodeToList`` fills them in from the list for that reason); a GET, a watch event, a custom
    resource list and a Table row with ``includeObject=Object`` name the kind."""
    from kubernetes import client

    api_server.store.create("pods", pod("p1"))
    api_server.store.create("nodemetrics", nodemetric("n1"))
    code, listed = raw_call(api_server, "GET", "/api/v1/namespaces/default/pods")
    assert code == 200 and (listed["kind"], listed["apiVersion"]) == ("PodList", "v1")
    (item,) = listed["items"]
    assert item["metadata"]["name"] == "p1" and "kind" not in item and "apiVersion" not in item
    _, got = raw_call(api_server, "GET", "/api/v1/namespaces/default/pods/p1")
    assert (got["kind"], got["apiVersion"]) == ("Pod", "v1")
    _, custom = raw_call(api_server, "GET", "/apis/slo.koordinator.sh/v1alpha1/nodemetrics")
    assert [(i["kind"], i["apiVersion"]) for i in custom["items"]] == [
        ("NodeMetric", "slo.koordinator.sh/v1alpha1")
    ]
    _, table = raw_call(
        api_server, "GET", "/api/v1/namespaces/default/pods?includeObject=Object", Accept=TABLE
    )
    assert [(r["object"]["kind"], r["object"]["apiVersion"]) for r in table["rows"]] == [("Pod", "v1")]
    _, gone = raw_call(api_server, "DELETE", "/api/v1/namespaces/default/pods?gracePeriodSeconds=0")
    assert [i["metadata"]["name"] for i in gone["items"]] == ["p1"] and "kind" not in gone["items"][0]
    core = client.CoreV1Api(client.ApiClient(api_server.client_config()))
    api_server.store.create("pods", pod("p2"))
    seen: list[Any] = []
    for event in new_watch().stream(
        core.list_namespaced_pod, "default", timeout_seconds=1, _preload_content=False
    ):
        seen.append(event["raw_object"] if isinstance(event, dict) else json.loads(event))
        break
    assert [(o["kind"], o["metadata"]["name"]) for o in seen] == [("Pod", "p2")]


@pytest.mark.tool("kubectl")
def test_kubectl_auth_can_i_says_what_the_server_then_does(api_server: APIServer, tmp_path: Path) -> None:
    """``pkg/registry/authorization/selfsubjectaccessreview/rest.go`` asks the server's own authorizer:
    with authorization off (kube-apiserver's ``AlwaysAllow``, ``authorizerfactory/builtin.go``) every
    review is allowed and the rules review lists ``*``, so ``kubectl auth can-i`` says yes to what
    ``kubectl`` then does (over plain HTTP kubectl sends no token: the caller is anonymous)."""
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump(api_server.kubeconfig()))
    kubectl = Kubectl(config, tmp_path)
    assert kubectl.ok("auth", "can-i", "create", "pods").strip() == "yes"
    assert kubectl.ok("auth", "can-i", "create", "pods", "--subresource=eviction", "-A").strip() == "yes"
    assert kubectl.ok("auth", "can-i", "get", "/metrics").strip() == "yes"
    rules = kubectl.ok("auth", "can-i", "--list")
    assert re.search(r"^\*\.\*\s+\[\]\s+\[\]\s+\[\*\]", rules, re.MULTILINE), rules
    assert "system:anonymous" in kubectl.ok("auth", "whoami")
    kubectl.ok("run", "p", "--image=busybox", "--restart=Never")
    assert api_server.store.get("pods", "p", "default")["metadata"]["name"] == "p"
    kubectl.ok("delete", "pod", "p", "--grace-period=0", "--force")


def _new_event(name: str, kind: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000001Z",
        "regarding": {"kind": kind, "apiVersion": "v1", "name": name, "namespace": "default"},
        "note": f"about {name}",
        "reportingController": "koord-scheduler",
        "reportingInstance": "koord-scheduler-host",
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "type": "Warning",
        **extra,
    }


def test_events_api_field_selectors_and_series(api_server: APIServer, tmp_path: Path) -> None:
    """``pkg/apis/events/v1/conversion.go`` (``AddFieldLabelConversionsForEvent``): events.k8s.io/v1
    selects by ``regarding.*``/``reportingController``, the same stored fields core v1 selects by
    ``involvedObject.*``/``reportingComponent``; ``validateV1EventSeries`` refuses a series under 2."""
    base = "/apis/events.k8s.io/v1/namespaces/default/events"
    for name, kind in (("p", "Pod"), ("n", "Node")):
        assert raw_call(api_server, "POST", base, _new_event(name, kind))[0] == 201
    series = {"count": 1, "lastObservedTime": "2026-01-01T00:00:01.000001Z"}
    code, refused = raw_call(api_server, "POST", base, _new_event("s", "Pod", series=series))
    assert code == 422 and refused["details"]["causes"][0]["field"] == "series.count"

    def names(path: str, selector: str) -> list[str]:
        code, body = raw_call(api_server, "GET", f"{path}?fieldSelector={selector}")
        assert code == 200, body
        return [i["metadata"]["name"] for i in body["items"]]

    core = "/api/v1/namespaces/default/events"
    assert names(base, "regarding.kind=Pod") == names(core, "involvedObject.kind=Pod") == ["p"]
    assert names(base, "reportingController=koord-scheduler,regarding.name=n") == ["n"]
    assert names(core, "reportingComponent=koord-scheduler") == ["n", "p"]
    assert raw_call(api_server, "GET", f"{base}?fieldSelector=involvedObject.kind=Pod")[0] == 400
    patch = {"series": {"count": 2, "lastObservedTime": "2026-01-01T00:06:00.000001Z"}}
    code, patched = raw_call(
        api_server, "PATCH", f"{base}/p", patch, **{"Content-Type": "application/strategic-merge-patch+json"}
    )
    assert code == 200 and patched["series"]["count"] == 2 and patched["note"] == "about p"


@pytest.mark.tool("kubectl")
def test_kubectl_get_events_names_the_object_kind(api_server: APIServer, tmp_path: Path) -> None:
    """``kubectl get events`` prints ``pod/<name>`` for an events.k8s.io Event (``printEvent``), with
    the series count, and both APIs' field selectors find it."""
    base = "/apis/events.k8s.io/v1/namespaces/default/events"
    assert raw_call(api_server, "POST", base, _new_event("p", "Pod"))[0] == 201
    patch = {"series": {"count": 3, "lastObservedTime": "2026-01-01T00:06:00.000001Z"}}
    headers = {"Content-Type": "application/strategic-merge-patch+json"}
    assert raw_call(api_server, "PATCH", f"{base}/p", patch, **headers)[0] == 200
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump(api_server.kubeconfig()))
    kubectl = Kubectl(config, tmp_path)
    core = kubectl.ok("get", "events", "--field-selector", "involvedObject.kind=Pod", "-o", "wide")
    (row,) = table(core)
    assert (row["OBJECT"], row["REASON"], row["COUNT"], row["SOURCE"]) == (
        "pod/p",
        "FailedScheduling",
        "3",
        "koord-scheduler, koord-scheduler-host",
    )
    new = kubectl.ok("get", "events.events.k8s.io", "--field-selector", "regarding.kind=Pod")
    assert [r["OBJECT"] for r in table(new)] == ["pod/p"]


def test_binding_refuses_a_gated_pod_as_kube_apiserver_does(api_server: APIServer) -> None:
    """``BindingREST.setPodNodeAndMetadata`` (``pkg/registry/core/pod/storage/storage.go``) refuses a pod
    with scheduling gates, one already bound and one being deleted with a 409 on ``pods/binding``; the
    real tier asks kube-apiserver the same (``tests/real/test_bindings.py``)."""
    from koordshared.kube.client import make_api_client
    from tests.real.bindings import PREFIX, refusals

    api = make_api_client(client_configuration=api_server.client_config())
    try:
        got = refusals(api, "default")
    finally:
        api.close()

    def conflict(case: str, why: str) -> tuple[int, str, str]:
        pod = f"{PREFIX}-{case}"
        return 409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{pod}": pod {pod} {why}'

    assert got == {
        "gated": conflict("gated", "has non-empty .spec.schedulingGates"),
        "bound": conflict("bound", 'is already assigned to node "nowhere"'),
        "leaving": conflict("leaving", "is being deleted, cannot be assigned to a host"),
        "other name": (400, "BadRequest", "name in URL does not match name in Binding object"),
    }
    assert api_server.store.list("pods", "default")[0] == []  # the helper cleaned up
