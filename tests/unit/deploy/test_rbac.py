"""The ClusterRole against the agent's real API traffic: every call ``ClusterAPI`` makes (recorded by the
in-repo API server) is authorized by a rule, every write verb granted is one the agent uses, and no rule
uses ``*``. Requests are turned into RBAC attributes the way kube-apiserver's RequestInfo does."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from koordlet.statesinformer import kube
from koordshared.apis.meta import groups
from koordshared.apis.topology import noderesourcetopology
from koordshared.kube.client import make_api_client
from koordshared.kube.delegation import APIReviewer
from koordshared.kube.informer import Informer
from tests.apiserver import APIServer, Request, requestinfo
from tests.apiserver.fixtures import api_server_factory  # noqa: F401
from tests.support.paths import ROOT

RBAC = ROOT / "deploy" / "daemonset" / "rbac.yaml"
DAEMONSET = RBAC.parent / "koordlet.yaml"
NODE = "node-a"
READ_VERBS = {"get", "list", "watch"}


@dataclass(frozen=True, slots=True)
class Attributes:
    """What RBAC authorizes: verb, API group and resource (``pods/eviction`` for a subresource)."""

    verb: str
    group: str
    resource: str


def attributes(req: Request) -> Attributes:
    """kube-apiserver's RequestInfo for a resource request (``tests.apiserver.requestinfo``)."""
    info = requestinfo.parse(req.method, req.path.split("?")[0], req.query)
    assert info.is_resource, req.path
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    return Attributes(info.verb, info.group, resource)


def rules() -> list[dict[str, Any]]:
    (role,) = [d for d in yaml.safe_load_all(RBAC.read_text()) if d and d["kind"] == "ClusterRole"]
    out: list[dict[str, Any]] = role["rules"]
    return out


def allows(rs: list[dict[str, Any]], a: Attributes) -> bool:
    return any(
        a.group in r.get("apiGroups", []) and a.resource in r.get("resources", []) and a.verb in r["verbs"]
        for r in rs
    )


def granted(rs: list[dict[str, Any]]) -> set[Attributes]:
    return {
        Attributes(v, g, res)
        for r in rs
        for g in r.get("apiGroups", [])
        for res in r.get("resources", [])
        for v in r["verbs"]
    }


@pytest.fixture
def traffic(api_server_factory: Callable[..., APIServer]) -> Iterator[set[Attributes]]:  # noqa: F811
    """Drive every ``ClusterAPI`` call the agent makes (writes, and list+watch of each informer), as the
    DaemonSet's ServiceAccount against a server enforcing the shipped RBAC (a missing grant is a 403)."""
    server = api_server_factory(authorization=True)
    server.apply(DAEMONSET, RBAC)
    sa = next(d for d in yaml.safe_load_all(DAEMONSET.read_text()) if d and d["kind"] == "ServiceAccount")
    identity = f"{sa['metadata']['namespace']}/{sa['metadata']['name']}"
    client = make_api_client(client_configuration=server.client_config(identity))
    capi = kube.ClusterAPI(client, NODE, request_timeout=5.0)
    stop = threading.Event()
    threads: list[threading.Thread] = []
    informers: list[Informer] = []
    try:
        assert capi.create_node_metric() == 201
        # The status is replaced at the version read; a stale one is a conflict, read again and retried.
        stale = capi.get_node_object(groups.NODE_METRICS)
        assert capi.update_node_metric_status({"updateTime": "2026-01-01T00:00:00Z"}, stale) == 200
        assert capi.update_node_metric_status({"updateTime": "2026-01-01T00:00:01Z"}, stale) == 200
        assert [r.status for r in server.requests if r.path.endswith(f"nodemetrics/{NODE}/status")] == [
            200,
            409,
            200,
        ]
        capi.evict("default", "be-pod", "0d3c5c3e-1111-2222-3333-444455556666")  # 404 is fine: authz first
        assert capi.create_event("Node", "", NODE, "uid-1", "Warning", "Test", "message", 0.0)
        # The node topology report: create, then replace (the body carries the resourceVersion read)
        nrt = noderesourcetopology.new_object(NODE, "")
        assert capi.write_node_topology(nrt, create=True) == 201
        stored = capi.get_node_object(groups.NODE_RESOURCE_TOPOLOGIES)
        assert capi.write_node_topology(stored, create=False) == 200
        # The HTTP endpoint's reviews of its callers (--authentication-token-webhook, Webhook mode).
        reviewer = APIReviewer(client)
        caller = reviewer.authenticate(server.token_for(*identity.split("/")))
        assert caller is not None and reviewer.authorize(caller, "get", "/metrics") is False
        factories: list[Callable[..., Informer]] = [
            capi.node_informer,
            capi.pods_informer,
            lambda **o: capi.custom_informer("nodeslos", **o),
            lambda **o: capi.custom_informer("nodemetrics", **o),
            lambda **o: capi.custom_informer("noderesourcetopologies", **o),
        ]
        for make in factories:
            inf = make(watch_timeout=1)
            informers.append(inf)
            t = threading.Thread(target=inf.run, args=(stop,), name=f"test-rbac-{inf.name}")
            t.start()
            threads.append(t)
        # A watch is logged when it ends (timeoutSeconds=1), so five logged watches mean each loop both
        # listed and watched.
        seen = server.wait_for_requests(lambda r: r.query.get("watch") == "true", count=5, timeout=10)
        assert len({r.path for r in seen}) == 5, [r.path for r in seen]
        yield {attributes(r) for r in server.requests}
    finally:
        stop.set()
        for inf in informers:
            inf.close()
        for t in threads:
            t.join(10)
        capi.close()


def test_every_api_call_of_the_agent_is_authorized(traffic: set[Attributes]) -> None:
    rs = rules()
    denied = sorted((a.verb, a.group, a.resource) for a in traffic if not allows(rs, a))
    assert not denied, f"the ClusterRole denies: {denied}"
    # The traffic really covers the agent's surface (guards against an empty recording passing).
    assert {a.verb for a in traffic} >= {"list", "watch", "create", "update"}
    assert {
        "pods/eviction",
        "events",
        "nodemetrics/status",
        "nodeslos",
        "nodes",
        "pods",
        "tokenreviews",
        "subjectaccessreviews",
    } <= {a.resource for a in traffic}


def test_every_write_granted_is_used_and_reads_follow_lists(traffic: set[Attributes]) -> None:
    rs = rules()
    unused_writes = sorted(
        (a.verb, a.group, a.resource) for a in granted(rs) if a.verb not in READ_VERBS and a not in traffic
    )
    assert not unused_writes, f"write verbs the agent never uses: {unused_writes}"
    kubelet_proxy = Attributes("get", "", "nodes/proxy")
    for a in granted(rs) - {kubelet_proxy}:
        if a.verb in READ_VERBS:
            parent = a.resource.split("/")[0]
            # get/list/watch of what the agent lists anyway adds no exposure; anything else must be used.
            assert a in traffic or Attributes("list", a.group, parent) in traffic, a


def test_kubelet_pods_endpoint_is_authorized_as_nodes_proxy_get() -> None:
    # The kubelet maps GET /pods to the nodes/proxy subresource (SubjectAccessReview with verb get).
    assert allows(rules(), Attributes("get", "", "nodes/proxy"))
    assert not allows(rules(), Attributes("create", "", "nodes/proxy"))


def test_no_wildcards_and_no_configmap_or_secret_access() -> None:
    for r in rules():
        for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
            assert all("*" not in str(v) for v in r.get(key, [])), r
        assert not {"secrets", "configmaps"} & set(r.get("resources", [])), r


def test_binding_names_the_daemonsets_service_account() -> None:
    objs = {d["kind"]: d for d in yaml.safe_load_all(RBAC.read_text()) if d}
    ds_docs = {d["kind"]: d for d in yaml.safe_load_all(DAEMONSET.read_text()) if d}
    sa = ds_docs["ServiceAccount"]["metadata"]
    binding = objs["ClusterRoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": objs["ClusterRole"]["metadata"]["name"],
    }
    assert {"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]} in binding["subjects"]
    pod = ds_docs["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == sa["name"]


def test_request_attributes_follow_kube_apiserver() -> None:
    def req(method: str, path: str, **query: str) -> Attributes:
        return attributes(Request(method, path, dict(query), {}, None, 200))

    assert req("POST", "/api/v1/namespaces/ns/pods/p/eviction") == Attributes("create", "", "pods/eviction")
    assert req("GET", "/api/v1/pods", watch="true") == Attributes("watch", "", "pods")
    assert req("GET", "/api/v1/nodes/n") == Attributes("get", "", "nodes")
    assert req("GET", "/api/v1/namespaces/ns") == Attributes("get", "", "namespaces")
    assert req("PATCH", "/apis/slo.koordinator.sh/v1alpha1/nodemetrics/n/status") == Attributes(
        "patch", "slo.koordinator.sh", "nodemetrics/status"
    )
