"""koord-manager's RBAC against its real API traffic: every request the manager sends (told apart by its
User-Agent in the test API server's log) is allowed by the ClusterRole or the namespaced Role, every
write verb granted is used, and nothing is granted with ``*``. Requests become RBAC attributes the way
kube-apiserver's RequestInfo does, including the name a ``metadata.name`` field selector gives a list
or watch (what lets ``resourceNames`` restrict them)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from koord.manager.webhook.server import WebhookConfig
from koordshared.kube.leaderelection import ElectionConfig
from tests.apiserver import APIServer, Request, requestinfo
from tests.apiserver.fixtures import DEFAULT_CRDS
from tests.managerharness import NS, get, node, running_manager, set_config, wait_until
from tests.support.paths import ROOT

RBAC = ROOT / "deploy" / "manager" / "rbac.yaml"
CCP_CRD = ROOT / "deploy" / "manager" / "crds" / "config.koordinator.sh_clustercolocationprofiles.yaml"
QUOTA_CRD = ROOT / "deploy" / "scheduler" / "crds" / "scheduling.sigs.k8s.io_elasticquotas.yaml"
NO_ADMISSION_API = {("update", "admissionregistration.k8s.io")}
"""Writes the test API server cannot receive (it has no admissionregistration API; the real tier,
``tests/real/test_webhook.py``, sees koord-manager update its webhook configurations)."""
READ_VERBS = {"get", "list", "watch"}


@dataclass(frozen=True, slots=True)
class Attrs:
    verb: str
    group: str
    resource: str
    namespace: str
    name: str


def request_attrs(req: Request) -> Attrs:
    """kube-apiserver's RequestInfo, including the name a ``metadata.name`` field selector gives a list or
    watch (``tests.apiserver.requestinfo`` does not derive that one yet)."""
    info = requestinfo.parse(req.method, req.path.split("?")[0], req.query)
    assert info.is_resource, req.path
    name = info.name
    if not name and info.verb in ("list", "watch"):
        for term in (req.query.get("fieldSelector") or "").split(","):
            key, _, value = term.partition("=")
            if key.strip() == "metadata.name":
                name = value.strip()
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    return Attrs(info.verb, info.group, resource, info.namespace, name)


def load() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(RBAC.read_text()) if d]


def rules() -> list[tuple[dict[str, Any], str | None]]:
    """(rule, namespace or None for cluster-wide)."""
    out: list[tuple[dict[str, Any], str | None]] = []
    for doc in load():
        if doc["kind"] == "ClusterRole":
            out += [(r, None) for r in doc["rules"]]
        elif doc["kind"] == "Role":
            out += [(r, doc["metadata"]["namespace"]) for r in doc["rules"]]
    return out


def allows(a: Attrs) -> bool:
    for rule, ns in rules():
        if ns is not None and ns != a.namespace:
            continue
        names = rule.get("resourceNames")
        if names is not None and a.name not in names:
            continue  # a create carries no name: never allowed by a resourceNames rule
        if a.group in rule["apiGroups"] and a.resource in rule["resources"] and a.verb in rule["verbs"]:
            return True
    return False


@pytest.fixture(scope="module")
def traffic() -> Iterator[set[Attrs]]:
    """Drive every call koord-manager makes: informers, creates, updates, deletes, node status patches,
    Events (created and aggregated), leader election (create, renew, release)."""
    crds = [*DEFAULT_CRDS, CCP_CRD, QUOTA_CRD]
    with APIServer(crds=crds) as server:
        yield _drive(server)


def _drive(server: APIServer) -> set[Attrs]:
    store = server.store
    set_config(server, colocation_config={"enable": True})
    store.create("nodes", node("n1"))
    store.create("nodes", node("n2"))
    election = ElectionConfig(
        namespace=NS, identity="rbac", lease_duration=3, renew_deadline=2, retry_period=0.2
    )
    webhook = WebhookConfig(port=0)
    with running_manager(
        server, leader_election=True, election=election, request_timeout=0.5, webhook=webhook
    ) as m:
        assert m.manager.webhook is not None
        wait_until(m.manager.webhook.has_synced, what="webhook certificates")
        hooks = m.manager.webhook.webhooks
        spec = {
            "qosClass": "BE",
            "priorityClassName": "koord-batch",
            "namespaceSelector": {"matchLabels": {}},
        }
        spec["namespaceSelector"] = {"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}
        ccp = {"metadata": {"name": "be"}, "spec": spec}
        server.apply(
            {"apiVersion": "config.koordinator.sh/v1alpha1", "kind": "ClusterColocationProfile", **ccp}
        )
        server.apply(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "koord-batch"},
                "value": 5000,
            }
        )
        selected = {"metadata": {"name": "p", "namespace": NS}, "spec": {"containers": []}}
        assert hooks.answer("/mutate-pod", _review("Pod", selected))[0] == 200
        eq = {"metadata": {"name": "q", "namespace": NS}, "spec": {"max": {"cpu": "1"}}}
        assert (
            hooks.answer(
                "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota", _review("ElasticQuota", eq)
            )[0]
            == 200
        )
        # Certificates lost from the Secret: renewed there (update).
        store.patch("secrets", "koordinator-webhook-certs", {"data": {"cert.pem": ""}}, namespace=NS)
        m.manager.webhook.sync()
        wait_until(
            lambda: get(server, "nodemetrics", "n2") is not None and get(server, "nodeslos", "n2") is not None
        )
        status = {
            "updateTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1", "memory": "1Gi"}}},
        }
        store.patch("nodemetrics", "n1", {"status": status}, subresource="status")
        wait_until(lambda: "kubernetes.io/batch-cpu" in store.get("nodes", "n1")["status"]["allocatable"])
        set_config(server, colocation_config={"enable": True, "metricReportIntervalSeconds": 20})
        wait_until(
            lambda: (
                store.get("nodemetrics", "n2")["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 20
            )
        )
        burst = {"clusterStrategy": {"policy": "auto"}}
        set_config(server, colocation_config="{", cpu_burst_config=burst)
        wait_until(lambda: store.get("nodeslos", "n2")["spec"]["cpuBurstStrategy"]["policy"] == "auto")
        # The same broken key again (another key changed): the Warning Event is aggregated (PATCH).
        set_config(
            server, colocation_config="{", cpu_burst_config=burst, system_config={"clusterStrategy": {}}
        )
        wait_until(
            lambda: any(r.method == "PATCH" and "/events/" in r.path for r in server.requests),
            what="aggregated",
        )
        store.delete("nodes", "n2")
        wait_until(lambda: get(server, "nodemetrics", "n2") is None and get(server, "nodeslos", "n2") is None)
    ours = [r for r in server.requests if r.headers.get("User-Agent", "").startswith("koord-manager/")]
    return {request_attrs(r) for r in ours}


def test_every_call_of_the_manager_is_allowed(traffic: set[Attrs]) -> None:
    denied = sorted((a.verb, a.resource, a.namespace, a.name) for a in traffic if not allows(a))
    assert not denied, f"the manager's RBAC denies: {denied}"
    resources = {a.resource for a in traffic}
    assert {
        "nodes",
        "pods",
        "nodes/status",
        "nodemetrics",
        "nodeslos",
        "configmaps",
        "leases",
        "events",
    } <= resources
    assert {a.verb for a in traffic} >= {"get", "list", "watch", "create", "update", "delete", "patch"}


def _review(kind: str, obj: dict[str, Any]) -> bytes:
    request = {"uid": "u", "kind": {"kind": kind}, "operation": "CREATE", "namespace": NS, "object": obj}
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


def test_every_write_granted_is_used(traffic: set[Attrs]) -> None:
    used = {(a.verb, a.group, a.resource) for a in traffic}
    for rule, _ns in rules():
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    if verb in READ_VERBS:
                        parent = resource.split("/")[0]
                        assert (verb, group, resource) in used or ("list", group, parent) in used, (
                            verb,
                            resource,
                        )
                    elif (verb, group) not in NO_ADMISSION_API:
                        assert (verb, group, resource) in used, f"{verb} {resource} granted but never used"


def test_no_wildcards_no_other_secret_and_no_agent_status() -> None:
    for rule, ns in rules():
        for key in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert all("*" not in str(v) for v in rule.get(key, [])), rule
        assert "nodemetrics/status" not in rule["resources"]
        if "secrets" in rule["resources"]:
            # Only its certificates' Secret in its namespace (a create names nothing: it cannot read).
            assert ns == NS and rule["resources"] == ["secrets"], rule
            assert rule["verbs"] == ["create"] or rule.get("resourceNames") == ["koordinator-webhook-certs"]


def test_bindings_name_the_deployments_service_account() -> None:
    docs = {d["kind"]: d for d in load()}
    deploy = [d for d in yaml.safe_load_all((RBAC.parent / "koord-manager.yaml").read_text()) if d]
    sa = next(d for d in deploy if d["kind"] == "ServiceAccount")["metadata"]
    pod = next(d for d in deploy if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == sa["name"]
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        assert {"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]} in docs[kind][
            "subjects"
        ]


def test_field_selector_names_a_list() -> None:
    req = Request(
        "GET",
        f"/api/v1/namespaces/{NS}/configmaps",
        {"fieldSelector": "metadata.name=x", "watch": "true"},
        {},
        None,
        200,
    )
    assert request_attrs(req) == Attrs("watch", "", "configmaps", NS, "x")
    assert (
        json.dumps(request_attrs(Request("POST", f"/api/v1/namespaces/{NS}/events", {}, {}, None, 201)).name)
        == '""'
    )
