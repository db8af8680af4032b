"""An operator's kubectl workflows against the test API server, with the real kubectl binary: the
README's ``kubectl apply`` lines, ``get -o wide``, ``explain``, ``drain`` stopped by a PodDisruptionBudget,
``auth can-i``/``whoami`` with a ServiceAccount token, the ``create`` commands (protobuf bodies), field
validation and server-side apply as kubectl reports them.

One server for the module, as an operator's cluster would be: HTTPS with RBAC enforced (kubectl sends
tokens over TLS only), kubelet confirmations automatic. The kubectl that ran is reported with the test
results (the one on PATH may dispatch to another binary by the server's version).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.apiserver import APIServer
from tests.apiserver.fixtures import DEFAULT_CRDS
from tests.support.paths import ROOT
from tests.unit.apiserver.helpers import pod
from tests.unit.apiserver.kubectl import Kubectl, minor, ran_version, table

pytestmark = pytest.mark.tool("kubectl", "openssl")
README = ROOT / "deploy" / "README.md"
_APPLY = re.compile(r"^kubectl apply -f (deploy/\S+)", re.MULTILINE)


@pytest.fixture(scope="module")
def server() -> Iterator[APIServer]:
    with APIServer(crds=DEFAULT_CRDS, authorization=True, tls=True, kubelet_auto_confirm=True) as api:
        yield api


@pytest.fixture(scope="module")
def kubectl(
    server: APIServer, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Kubectl]:
    home = tmp_path_factory.mktemp("kubectl-home")
    config = home / "kubeconfig"
    config.write_text(yaml.safe_dump(server.kubeconfig()))
    run = Kubectl(config, home)
    yield run
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\nkubectl workflow: ran kubectl {ran_version(server) or '(none)'}")


def test_kubectl_version_is_the_one_reported(
    server: APIServer, kubectl: Kubectl, record_property: Any
) -> None:
    """``kubectl version`` shows the server's version; the binary that ran is named in the results."""
    out = yaml.safe_load(kubectl.ok("version", "-o", "yaml"))
    assert out["serverVersion"]["gitVersion"].startswith("v1.33")
    ran = ran_version(server)
    record_property("kubectl", ran)
    assert minor(ran) >= 20, f"kubectl {ran!r} ran"


def _readme_applies() -> list[str]:
    return list(dict.fromkeys(_APPLY.findall(README.read_text())))


def test_apply_deploy_as_the_readme_says(server: APIServer, kubectl: Kubectl) -> None:
    """Every ``kubectl apply -f deploy/...`` line of deploy/README.md, in order, with client-side apply
    and kubectl's default strict validation: each object is created; applying again writes nothing. (A
    Deployment whose ``strategy`` leaves ``type`` to the default still says "configured": kubectl sends a
    ``$retainKeys`` patch for it, as against kube-apiserver, which changes nothing.) The PodMonitor needs
    the Prometheus Operator's CRD, as the README says; it alone is refused."""
    paths = _readme_applies()
    assert "deploy/daemonset/crds/" in paths and "deploy/daemonset/koordlet.yaml" in paths
    for round_ in ("created", "unchanged"):
        before = server.store.resource_version
        for path in paths:
            done = kubectl("apply", "-f", path)
            if path.endswith("prometheus-scrape.yaml"):
                assert 'no matches for kind "PodMonitor"' in done.stderr, done.stderr
            else:
                assert done.returncode == 0, f"{path}: {done.stderr}"
        if round_ == "unchanged":
            assert server.store.resource_version == before, "a second apply wrote something"
    ds = server.store.get("daemonsets.apps", "koordlet", "koordinator-system")
    assert (
        ds["spec"]["updateStrategy"]["type"] == "RollingUpdate" and ds["spec"]["revisionHistoryLimit"] == 10
    )
    assert "kubectl.kubernetes.io/last-applied-configuration" in ds["metadata"]["annotations"]
    creates = [r for r in server.requests if r.method == "POST" and "/namespaces/" in r.path]
    assert creates and all(r.query.get("fieldValidation") == "Strict" for r in creates)
    assert not server.internal_errors, server.internal_errors


def test_get_wide_tables_and_custom_resources(server: APIServer, kubectl: Kubectl) -> None:
    """``kubectl get`` prints the server's tables: the pod and node columns of ``-o wide``, the CRDs'
    (Name, Age), and ``get all`` finds pods, services and workloads through the "all" category."""
    server.store.create(
        "nodes",
        {
            "metadata": {"name": "wide-node", "labels": {"node-role.kubernetes.io/worker": ""}},
            "spec": {"unschedulable": True},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.9"}],
                "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Debian GNU/Linux 12"},
            },
        },
    )
    server.store.create("namespaces", {"metadata": {"name": "wide"}})
    server.store.create(
        "pods", {**pod("web", "wide-node", "wide"), "status": {"phase": "Running", "podIP": "10.1.2.3"}}
    )
    server.store.create(
        "nodemetrics",
        {"metadata": {"name": "wide-node"}, "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}}},
    )
    server.store.create("nodeslos", {"metadata": {"name": "wide-node"}, "spec": {}})
    template = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    spec = {"selector": {"matchLabels": {"app": "a"}}, "template": template}
    server.store.create("daemonsets.apps", {"metadata": {"name": "agent", "namespace": "wide"}, "spec": spec})
    (row,) = table(kubectl.ok("get", "pods", "-n", "wide", "-o", "wide"))
    assert (row["NAME"], row["STATUS"], row["IP"], row["NODE"], row["READY"]) == (
        "web",
        "Running",
        "10.1.2.3",
        "wide-node",
        "0/1",
    )
    assert row["NOMINATED NODE"] == "<none>" and re.fullmatch(r"\d+s", row["AGE"])
    nodes = {r["NAME"]: r for r in table(kubectl.ok("get", "nodes", "-o", "wide"))}
    node = nodes["wide-node"]
    assert (node["STATUS"], node["ROLES"], node["INTERNAL-IP"], node["OS-IMAGE"]) == (
        "Ready,SchedulingDisabled",
        "worker",
        "10.0.0.9",
        "Debian GNU/Linux 12",
    )
    custom = kubectl.ok("get", "nodemetrics,nodeslos")
    assert (
        "nodemetric.slo.koordinator.sh/wide-node" in custom
        and "nodeslo.slo.koordinator.sh/wide-node" in custom
    )
    everything = kubectl.ok("get", "all", "-n", "wide")
    assert "pod/web" in everything and "daemonset.apps/agent" in everything


def test_explain_built_in_and_custom_types(kubectl: Kubectl) -> None:
    """``kubectl explain`` renders /openapi/v3: a built-in field with its type and -required-, a CRD's
    schema with its descriptions."""
    ports = kubectl.ok("explain", "pods.spec.containers.ports")
    assert re.search(r"containerPort\s+<integer> -required-", ports), ports
    spec = kubectl.ok("explain", "nodemetrics.spec")
    assert "metricCollectPolicy" in spec and "KIND:       NodeMetric" in spec
    deployment = kubectl.ok("explain", "deployments.spec.strategy", "--output=plaintext-openapiv2")
    assert "rollingUpdate" in deployment  # /openapi/v2 in protobuf, decoded by kubectl


def _running(server: APIServer, ns: str, name: str, labels: dict[str, str], owner: dict[str, Any]) -> None:
    body = pod(name, "drain-node", ns, **labels)
    body["metadata"]["ownerReferences"] = [owner]
    server.store.create("pods", body)

    def ready(p: dict[str, Any]) -> dict[str, Any]:
        p["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        return p

    server.store.guaranteed_update("pods", name, ns, ready)


@pytest.mark.slow
def test_drain_evicts_through_the_api_and_stops_at_a_pdb(server: APIServer, kubectl: Kubectl) -> None:
    """``kubectl drain``: cordons, skips the DaemonSet's pod (``--ignore-daemonsets``, which needs the
    DaemonSet to exist), evicts through ``pods/eviction`` (discovery says policy/v1 Eviction, so never a
    DELETE), and retries the pod whose PodDisruptionBudget allows no disruption until its timeout."""
    ns = "drain"
    server.store.create("namespaces", {"metadata": {"name": ns}})
    server.store.create(
        "nodes",
        {"metadata": {"name": "drain-node"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
    )
    kubectl.ok("create", "pdb", "web", "-n", ns, "--selector=app=web", "--max-unavailable=0")
    ds = server.store.create(
        "daemonsets.apps",
        {
            "metadata": {"name": "agent", "namespace": ns},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]},
                },
            },
        },
    )

    def owner(kind: str, name: str, uid: str) -> dict[str, Any]:
        return {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": True}

    _running(server, ns, "agent-x", {"app": "agent"}, owner("DaemonSet", "agent", ds["metadata"]["uid"]))
    _running(
        server,
        ns,
        "web-1",
        {"app": "web"},
        owner("ReplicaSet", "web", "00000000-0000-0000-0000-000000000001"),
    )
    _running(
        server,
        ns,
        "batch-1",
        {"app": "batch"},
        owner("ReplicaSet", "batch", "00000000-0000-0000-0000-000000000002"),
    )
    server.clear_requests()
    done = kubectl("drain", "drain-node", "--ignore-daemonsets", "--timeout=2s")
    assert done.returncode != 0
    assert "pod/batch-1 evicted" in done.stdout, done.stdout
    assert "Cannot evict pod as it would violate the pod's disruption budget" in done.stderr, done.stderr
    assert f"ignoring DaemonSet-managed Pods: {ns}/agent-x" in done.stderr
    left = sorted(p["metadata"]["name"] for p in server.store.list("pods", ns)[0])
    assert left == ["agent-x", "web-1"]
    assert server.store.get("nodes", "drain-node")["spec"]["unschedulable"] is True
    evictions = [r for r in server.requests if r.path.endswith("/eviction")]
    assert {r.path.split("/")[-2] for r in evictions} == {"batch-1", "web-1"}
    assert {(r.body["apiVersion"], r.body["kind"]) for r in evictions} == {("policy/v1", "Eviction")}
    assert not [r for r in server.requests if r.method == "DELETE" and "/pods/" in r.path]
    kubectl.ok("uncordon", "drain-node")
    assert not server.store.get("nodes", "drain-node")["spec"].get("unschedulable")


def test_auth_can_i_and_whoami_with_a_service_account_token(server: APIServer, kubectl: Kubectl) -> None:
    """RBAC made with ``kubectl create`` (protobuf bodies), a token from ``kubectl create token``
    (TokenRequest), then ``auth can-i`` (SelfSubjectAccessReview), ``auth can-i --list``
    (SelfSubjectRulesReview) and ``auth whoami`` (SelfSubjectReview) as that ServiceAccount, over TLS."""
    ran = ran_version(server)
    if minor(ran) < 28:
        pytest.skip(f"kubectl {ran} has no 'create token' or 'auth whoami'")
    ns = "team"
    for args in (
        ("namespace", ns),
        ("serviceaccount", "bot", "-n", ns),
        ("role", "pod-reader", "-n", ns, "--verb=get,list,watch", "--resource=pods"),
        ("rolebinding", "bot-reads", "-n", ns, "--role=pod-reader", f"--serviceaccount={ns}:bot"),
    ):
        kubectl.ok("create", *args)
    token = kubectl.ok("create", "token", "bot", "-n", ns, "--duration=20m").strip()
    assert kubectl.ok("auth", "can-i", "list", "pods", "-n", ns, token=token).strip() == "yes"
    denied = kubectl("auth", "can-i", "delete", "pods", "-n", ns, token=token)
    assert (denied.returncode, denied.stdout.strip()) == (1, "no")
    assert kubectl("auth", "can-i", "list", "pods", "-n", "default", token=token).stdout.strip() == "no"
    rules = kubectl.ok("auth", "can-i", "--list", "-n", ns, token=token)
    assert re.search(r"^pods\s+\[\]\s+\[\]\s+\[get list watch\]", rules, re.MULTILINE), rules
    who = kubectl.ok("auth", "whoami", token=token)
    assert f"system:serviceaccount:{ns}:bot" in who
    forbidden = kubectl("get", "nodes", token=token)
    assert forbidden.returncode == 1 and "Forbidden" in forbidden.stderr
    created = [r for r in server.requests if r.method == "POST" and r.path.endswith("/rolebindings")]
    assert created[-1].headers.get("Content-Type") == "application/vnd.kubernetes.protobuf"


def test_create_commands_store_what_kubectl_built(server: APIServer, kubectl: Kubectl) -> None:
    """Objects kubectl builds itself (sent as protobuf) are stored as the JSON it describes."""
    ns = "made"
    kubectl.ok("create", "namespace", ns)
    kubectl.ok("create", "configmap", "cfg", "-n", ns, "--from-literal=a=1")
    kubectl.ok("create", "secret", "generic", "key", "-n", ns, "--from-literal=k=v")
    kubectl.ok("create", "priorityclass", "batch-low", "--value=100", "--description=low")
    kubectl.ok("create", "service", "clusterip", "front", "-n", ns, "--tcp=80:8080")
    kubectl.ok("create", "pdb", "front", "-n", ns, "--selector=app=front", "--min-available=50%")
    assert server.store.get("configmaps", "cfg", ns)["data"] == {"a": "1"}
    assert server.store.get("secrets", "key", ns)["data"] == {"k": "dg=="}
    pc = server.store.get("priorityclasses.scheduling.k8s.io", "batch-low")
    assert (pc["value"], pc["description"]) == (100, "low")
    svc = server.store.get("services", "front", ns)["spec"]
    assert svc["ports"][0]["targetPort"] == 8080 and svc["clusterIP"].startswith("10.96.")
    assert server.store.get("poddisruptionbudgets.policy", "front", ns)["spec"]["minAvailable"] == "50%"
    refused = kubectl("create", "deployment", "web", "-n", ns, "--image=nginx")
    assert refused.returncode == 1 and "accepted media types include: application/json" in refused.stderr


def test_field_validation_and_server_side_apply_as_kubectl_reports_them(
    tmp_path: Path, kubectl: Kubectl
) -> None:
    """kubectl's ``--validate`` is the server's fieldValidation: strict (the default) refuses an unknown
    field, warn creates and prints the warning, ignore is silent. ``--server-side`` gets the 415 of a
    server without server-side apply."""
    manifest = tmp_path / "cm.yaml"
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "typo", "namespace": "default"},
        "dat": {},
    }
    manifest.write_text(yaml.safe_dump(doc))
    strict = kubectl("create", "-f", str(manifest))
    assert strict.returncode == 1 and 'strict decoding error: unknown field "dat"' in strict.stderr, (
        strict.stderr
    )
    warned = kubectl("create", "-f", str(manifest), "--validate=warn")
    assert warned.returncode == 0 and 'Warning: unknown field "dat"' in warned.stderr, warned.stderr
    doc["metadata"]["name"] = "quiet"
    manifest.write_text(yaml.safe_dump(doc))
    quiet = kubectl("create", "-f", str(manifest), "--validate=ignore")
    assert quiet.returncode == 0 and "Warning" not in quiet.stderr
    ssa = kubectl("apply", "--server-side", "-f", str(manifest))
    assert ssa.returncode == 1 and "Server-side apply not available on the server" in ssa.stderr, ssa.stderr


def test_the_loops_kubectl_hints_work(kubectl: Kubectl) -> None:
    """The commands ``make loop`` prints to watch it from another terminal run as printed (a watch
    without ``--watch``, so that it returns)."""
    from tests.loop.components import kubectl_hints

    lines = kubectl_hints(kubectl.kubeconfig)
    assert f"  export KUBECONFIG={kubectl.kubeconfig}" in lines
    commands = [line.split()[1:] for line in lines if line.strip().startswith("kubectl ")]
    assert commands
    for args in commands:
        kubectl.ok(*(a for a in args if a != "--watch"))
