"""ElasticQuota in the real ``koord-scheduler`` process against the test API server (with the repository's
ElasticQuota CRD): the built-in quotas created, admission refused over the runtime with the reason on the
pod, the figures written to the quota objects, the pods admitted once another quota lends again, the
over-use revoke evicting the least important pods, preemption inside the quota; and the ClusterRole of
``deploy/scheduler/elasticquota-rbac.yaml`` allowing exactly the plugin's own API traffic."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordlet.testing.wait import wait_until
from koordshared.apis.extension import elasticquota as eq
from koordshared.testing import objects
from tests.apiserver import APIServer
from tests.apiserver.fixtures import DEFAULT_CRDS, api_server_factory  # noqa: F401
from tests.cluster.koordscheduler import running
from tests.support.paths import ROOT
from tests.unit.deploy.test_rbac import READ_VERBS, allows, attributes, granted

pytestmark = pytest.mark.slow

DEPLOY = ROOT / "deploy" / "scheduler"
CRD = DEPLOY / "crds" / "scheduling.sigs.k8s.io_elasticquotas.yaml"
S = "koord-scheduler"
CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [
        {
            "schedulerName": S,
            "plugins": {
                "multiPoint": {"enabled": [{"name": "ElasticQuota"}]},
                "postFilter": {
                    "disabled": [{"name": "*"}],
                    "enabled": [{"name": "ElasticQuota"}, {"name": "DefaultPreemption"}],
                },
            },
            "pluginConfig": [
                {
                    "name": "ElasticQuota",
                    "args": {
                        "apiVersion": "kubescheduler.config.k8s.io/v1",
                        "kind": "ElasticQuotaArgs",
                        "quotaGroupNamespace": "koordinator-system",
                        "monitorAllQuotas": True,
                        "delayEvictTime": "2s",
                    },
                }
            ],
        }
    ],
}


@pytest.fixture
def server(api_server_factory: Callable[..., APIServer]) -> APIServer:  # noqa: F811
    return api_server_factory(crds=[*DEFAULT_CRDS, CRD], kubelet_auto_confirm=True)


def quota(name: str, *, lends: bool = True) -> dict[str, Any]:
    mins = {"a": "1", "b": "3"}
    return objects.elastic_quota(name, minimum={"cpu": mins[name]}, maximum={"cpu": "4"}, lends=lends)


def a_pod(name: str, priority: int) -> dict[str, Any]:
    return objects.pod(
        name,
        requests={"cpu": "1"},
        labels={eq.LABEL_QUOTA_NAME: "a"},
        priority=priority,
        scheduler_name=S,
    )


def bound(server: APIServer) -> dict[str, str]:
    pods, _ = server.store.list("pods", "default")
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")}


def names(server: APIServer) -> set[str]:
    return {p["metadata"]["name"] for p in server.store.list("pods", "default")[0]}


def annotation(server: APIServer, name: str, key: str) -> Any:
    obj = server.store.get("elasticquotas", name, "default")
    raw = (obj["metadata"].get("annotations") or {}).get(key)
    return json.loads(raw) if raw else None


def wait(cond: Callable[[], object], log: Path, timeout: float = 30) -> None:
    assert wait_until(cond, timeout, step=0.05), log.read_text()[-3000:]


def test_elastic_quota_in_the_process(server: APIServer, tmp_path: Path) -> None:
    server.store.create(
        "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "koordinator-system"}}
    )
    server.store.create("nodes", objects.node("n1", "4", "16Gi"))
    server.store.create("elasticquotas", quota("a"))
    server.store.create("elasticquotas", quota("b", lends=False))  # b keeps its 3: a gets 4 - 3 = 1
    for i, prio in enumerate((1, 2, 3, 4)):
        server.store.create("pods", a_pod(f"a{i}", prio))
    before = len(server.requests)
    with running(tmp_path, server, CONFIG) as ks:
        log = ks.log_path
        # Admission: one pod of a fits its runtime; the others say why.
        wait(lambda: len(bound(server)) == 1, log)
        assert list(bound(server)) == ["a3"]  # the most important goes first
        waiting = server.store.get("pods", "a0", "default")
        wait(lambda: _condition(server, "a0") is not None, log)
        message = str(_condition(server, "a0"))
        assert (
            "Insufficient quotas, quotaName: a, runtime: cpu:1, used: cpu:1, pod's request: cpu:1" in message
        )
        assert waiting["spec"].get("nodeName") is None
        # The figures on the quota objects; the built-in quotas created.
        wait(lambda: annotation(server, "a", eq.ANNOTATION_RUNTIME) == {"cpu": "1"}, log)
        assert annotation(server, "a", eq.ANNOTATION_REQUEST) == {"cpu": "4"}
        wait(
            lambda: server.store.get("elasticquotas", "a", "default").get("status") == {"used": {"cpu": "1"}},
            log,
        )
        for built_in in eq.BUILT_IN:
            assert server.store.exists("elasticquotas", built_in, "koordinator-system")
        # b lends again: a's runtime grows to its request, 4, and the other pods are admitted.
        server.store.patch("elasticquotas", "b", {"metadata": {"labels": None}}, namespace="default")
        wait(lambda: len(bound(server)) == 4, log)
        # b keeps its min again: a is over-used (4 > 1); after delayEvictTime the revoke evicts the least
        # important pods until a fits.
        server.store.patch(
            "elasticquotas",
            "b",
            {"metadata": {"labels": {eq.LABEL_ALLOW_LENT_RESOURCE: "false"}}},
            namespace="default",
        )
        wait(lambda: names(server) == {"a3"}, log)
        # Preemption inside the quota: a more important pod of a takes a3's place.
        server.store.create("pods", a_pod("urgent", 10))
        wait(lambda: bound(server) == {"urgent": "n1"}, log)
    traffic = {
        attributes(r)
        for r in server.requests[before:]
        if "/elasticquotas" in r.path or r.path.endswith("/eviction")
    }
    role = [d for d in yaml.safe_load_all((DEPLOY / "elasticquota-rbac.yaml").read_text()) if d]
    (cluster_role,) = [d for d in role if d["kind"] == "ClusterRole"]
    rules = cluster_role["rules"]
    assert sorted((a.verb, a.resource) for a in traffic if not allows(rules, a)) == []
    unused = sorted(
        (a.verb, a.resource) for a in granted(rules) if a not in traffic and a.verb not in READ_VERBS
    )
    assert unused == []


def _condition(server: APIServer, name: str) -> str | None:
    pod = server.store.get("pods", name, "default")
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message"))
    return None
