"""koord-manager's admission webhooks registered with the real kube-apiserver (``webhooks.yaml`` and the
ClusterColocationProfile CRD of ``deploy/manager`` as shipped): a pod ``kubectl`` creates in a namespace a
profile selects comes out BE with batch resources and koord-scheduler as its scheduler; an invalid
slo-controller-config, an ElasticQuota tree whose children's min exceeds the parent's and a BE pod of the
prod class are refused with Koordinator's messages; with the webhook server gone, the pods'
``failurePolicy: Ignore`` admits a pod unchanged.

The webhook server is a koord-manager of its own here (no controllers), started with Koordinator's
``WEBHOOK_HOST`` set to the node's address: kube-apiserver then calls it by URL. The configurations name a
Service, which kube-apiserver reaches by its ClusterIP without ``--enable-aggregator-routing``, and the
real cluster runs no kube-proxy; the URL is Koordinator's own way for a webhook outside the pod network.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.realcluster import node, stack
from tests.realcluster.cluster import Cluster
from tests.realcluster.control import write_kubeconfig
from tests.realcluster.procs import spawn, wait_until
from tests.support.paths import ROOT

NS = "colo-webhook"
DEPLOY = ROOT / "deploy" / "manager"
CRD = DEPLOY / "crds" / "config.koordinator.sh_clustercolocationprofiles.yaml"
WEBHOOKS = DEPLOY / "webhooks.yaml"
MUTATING = "koordinator-mutating-webhook-configuration"
VALIDATING = "koordinator-validating-webhook-configuration"


def kubectl_json(c: Cluster, *args: str) -> Any:
    return json.loads(c.kubectl(*args, "-o", "json"))


def refused(c: Cluster, *args: str, stdin: str | None = None) -> str:
    """kubectl's error text for a request the API server refuses (fails the test if it is accepted)."""
    out = subprocess.run(
        ["kubectl", f"--kubeconfig={c.admin_kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode != 0, f"accepted: {out.stdout}"
    return out.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind((node.NODE_IP, 0))
        return int(s.getsockname()[1])


SERVER: list[Any] = []
"""The webhook server's process, for the failurePolicy test."""


@pytest.fixture(scope="module")
def webhook(cluster: Cluster) -> Iterator[Cluster]:
    c = cluster
    c.kubectl("apply", "--validate=strict", "-f", str(CRD))
    c.kubectl("wait", "--for=condition=Established", "crd/clustercolocationprofiles.config.koordinator.sh")
    admin = c.admin_kubeconfig
    token = stack.service_account_token(admin, "koord-manager")
    work = c.state / "webhook-test"
    kubeconfig = write_kubeconfig(
        work / "kubeconfig", c.server, c.pki / "ca.crt", user="koord-manager", token=token
    )
    port = free_port()
    env = {
        "KUBECONFIG": str(kubeconfig),
        "WEBHOOK_PORT": str(port),
        "WEBHOOK_HOST": node.NODE_IP,
        "POD_NAMESPACE": "koordinator-system",
        "PYTHONPATH": str(ROOT),
    }
    argv = [
        sys.executable,
        "-m",
        "koord.manager",
        "--addr=127.0.0.1:0",
        "--controllers=-nodemetric,-nodeslo,-noderesource",
        "--enable-leader-election=false",
    ]
    proc = spawn("koord-manager-webhook", argv, c.logs, env=env, cwd=work)
    c.kubectl("apply", "--validate=strict", "-f", str(WEBHOOKS))
    c.kubectl("create", "namespace", NS)
    c.kubectl("label", "namespace", NS, "koordinator.sh/enable-colocation=true")
    try:

        def patched() -> bool:
            conf = kubectl_json(c, "get", "mutatingwebhookconfiguration", MUTATING)
            cc = conf["webhooks"][0]["clientConfig"]
            url, ca = str(cc.get("url", "")), str(cc.get("caBundle", ""))
            return url.startswith(f"https://{node.NODE_IP}:{port}/") and ca not in ("", "Cg==")

        wait_until("the webhook configurations patched with our CA and URL", patched, 90, watch=[proc])
        SERVER.append(proc)
        yield c
    finally:
        SERVER.clear()
        proc.stop()
        c.kubectl("delete", "-f", str(WEBHOOKS), "--ignore-not-found", "--wait=false")
        c.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=false")
        c.kubectl("delete", "clustercolocationprofiles", "--all")
        c.kubectl(
            "delete", "-n", "koordinator-system", "secret", "koordinator-webhook-certs", "--ignore-not-found"
        )


PROFILE = {
    "apiVersion": "config.koordinator.sh/v1alpha1",
    "kind": "ClusterColocationProfile",
    "metadata": {"name": "colocation-be"},
    "spec": {
        "namespaceSelector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
        "selector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
        "qosClass": "BE",
        "priorityClassName": "koord-batch",
        "koordinatorPriority": 1000,
        "schedulerName": "koord-scheduler",
        "labels": {"koordinator.sh/mutated": "true"},
    },
}


def pod_manifest(name: str) -> str:
    resources = {"cpu": "500m", "memory": "256Mi"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"koordinator.sh/enable-colocation": "true"}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": resources, "limits": resources},
                }
            ]
        },
    }
    return yaml.safe_dump(pod)


def test_kubectl_creates_a_be_pod_with_batch_resources_for_koord_scheduler(webhook: Cluster) -> None:
    # Proves against: kube-apiserver calling the mutating webhook by URL over TLS with our CA, applying
    # our JSON patch, then validating the result (PriorityClass admission, extended resources).
    c = webhook
    c.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(PROFILE))
    c.kubectl("create", "-f", "-", stdin=pod_manifest("colocated"))
    pod = kubectl_json(c, "get", "pod", "-n", NS, "colocated")
    labels, spec = pod["metadata"]["labels"], pod["spec"]
    assert labels["koordinator.sh/qosClass"] == "BE" and labels["koordinator.sh/priority"] == "1000"
    assert labels["koordinator.sh/mutated"] == "true"
    assert spec["schedulerName"] == "koord-scheduler"
    assert (spec["priorityClassName"], spec["priority"]) == ("koord-batch", 5000)
    res = spec["containers"][0]["resources"]
    want = {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "256Mi"}
    assert res["requests"] == want and res["limits"] == want, res
    assert "node.koordinator.sh/extended-resource-spec" in pod["metadata"]["annotations"]
    c.kubectl("delete", "pod", "-n", NS, "colocated", "--grace-period=0", "--force")


def test_an_invalid_slo_controller_config_is_refused_with_koordinators_message(webhook: Cluster) -> None:
    c = webhook
    patch = json.dumps({"data": {"colocation-config": json.dumps({"enable": True, "degradeTimeMinutes": 0})}})
    err = refused(c, "patch", "configmap", "-n", "koordinator-system", "slo-controller-config", "-p", patch)
    assert 'admission webhook "vconfigmap.koordinator.sh" denied the request' in err, err
    assert (
        '___{"reason":"ConfigParamInvalid","message":{"ColocationCfg.ColocationStrategy.DegradeTimeMinutes":'
        '"DegradeTimeMinutes must be 1 or greater"}}___'
    ) in err, err


def quota(name: str, cpu_min: str, parent: str = "", is_parent: bool = False) -> str:
    labels = {}
    if parent:
        labels["quota.scheduling.koordinator.sh/parent"] = parent
    if is_parent:
        labels["quota.scheduling.koordinator.sh/is-parent"] = "true"
    doc = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"min": {"cpu": cpu_min, "memory": "1Gi"}, "max": {"cpu": "8", "memory": "8Gi"}},
    }
    return yaml.safe_dump(doc)


def test_a_quota_tree_over_its_parents_min_is_refused(webhook: Cluster) -> None:
    c = webhook
    c.kubectl("create", "-f", "-", stdin=quota("team", "2", is_parent=True))
    c.kubectl("create", "-f", "-", stdin=quota("team-a", "1", parent="team"))
    err = refused(c, "create", "-f", "-", stdin=quota("team-b", "2", parent="team"))
    assert 'admission webhook "velasticquota.koordinator.sh" denied the request' in err, err
    assert "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: team" in err, err
    err = refused(c, "delete", "elasticquota", "-n", NS, "team")
    assert "delete quota failed, quota team has 1 child quotas" in err, err
    c.kubectl("delete", "elasticquota", "-n", NS, "team-a", "team")


def test_a_be_pod_of_the_prod_class_is_refused(webhook: Cluster) -> None:
    c = webhook
    doc = yaml.safe_load(pod_manifest("be-prod"))
    doc["metadata"]["labels"] = {"koordinator.sh/qosClass": "BE"}
    doc["spec"]["priorityClassName"] = "koord-prod"
    err = refused(c, "create", "-f", "-", stdin=yaml.safe_dump(doc))
    want = "Pod: Forbidden: koordinator.sh/qosClass=BE and priorityClass=koord-prod cannot be used"
    assert f"{want} in combination" in err, err


def test_with_the_webhook_server_gone_failure_policy_ignore_admits_the_pod_unchanged(
    webhook: Cluster,
) -> None:
    # Proves against: kube-apiserver's failurePolicy handling of a webhook it cannot reach.
    c = webhook
    (proc,) = SERVER
    proc.stop()
    c.kubectl("create", "-f", "-", stdin=pod_manifest("unmutated"))
    pod = kubectl_json(c, "get", "pod", "-n", NS, "unmutated")
    assert "koordinator.sh/qosClass" not in pod["metadata"]["labels"]
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "256Mi"}
    c.kubectl("delete", "pod", "-n", NS, "unmutated", "--grace-period=0", "--force")
