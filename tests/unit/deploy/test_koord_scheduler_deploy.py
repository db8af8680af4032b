"""deploy/scheduler/koord-scheduler*.yaml: the manifests parse and agree with each other and with the real
CLI; the configuration loads with koord-scheduler's own parser and enables LoadAwareScheduling; the RBAC
stays within kube-scheduler's ``system:kube-scheduler`` plus NodeMetrics and the PreBind PATCH, and,
enforced by the test API server, lets the real process do its work (caches, binding, status, Events, its
Lease) while granting no write it does not make."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from koord.scheduler import cli, config
from koord.scheduler.plugins import plugin_registry
from koordlet.testing.wait import wait_until
from koordshared.testing import objects
from tests.apiserver import APIServer
from tests.apiserver.fixtures import DEFAULT_CRDS
from tests.cluster.koordscheduler import KoordSchedulerProcess, condition, events_for, node_of
from tests.unit.deploy.test_manager_rbac import READ_VERBS, request_attrs
from tests.unit.deploy.test_scheduler_deploy import DEPLOY, one

NS = "koordinator-system"
MOUNTED = "--config=/etc/koord-scheduler/koord-scheduler-config.yaml"
KUBE_SCHEDULER_READS = {
    ("", r)
    for r in (
        "nodes",
        "pods",
        "namespaces",
        "services",
        "replicationcontrollers",
        "persistentvolumeclaims",
        "persistentvolumes",
    )
} | {
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("policy", "poddisruptionbudgets"),
    ("storage.k8s.io", "csinodes"),
    ("storage.k8s.io", "csidrivers"),
    ("storage.k8s.io", "csistoragecapacities"),
    ("storage.k8s.io", "storageclasses"),
}
"""What kube-scheduler's bootstrap ClusterRole ``system:kube-scheduler`` lets it read (kubernetes
``plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go``)."""
KUBE_SCHEDULER_WRITES = {
    ("create", "", "pods/binding"),
    ("patch", "", "pods/status"),
    ("update", "", "pods/status"),
    ("delete", "", "pods"),
    *((verb, group, "events") for verb in ("create", "patch", "update") for group in ("", "events.k8s.io")),
}


def container() -> dict[str, Any]:
    (c,) = one("koord-scheduler.yaml", "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(c)


def config_doc() -> dict[str, Any]:
    out: dict[str, Any] = yaml.safe_load(
        one("koord-scheduler.yaml", "ConfigMap")["data"]["koord-scheduler-config.yaml"]
    )
    return out


def rules(kind: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = one("koord-scheduler-rbac.yaml", kind)["rules"]
    return out


def granted() -> set[tuple[str, str, str]]:
    return {
        (verb, group, resource)
        for kind in ("ClusterRole", "Role")
        for r in rules(kind)
        for verb in r["verbs"]
        for group in r["apiGroups"]
        for resource in r["resources"]
    }


def test_the_cli_accepts_the_deployment_args_and_configuration(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config_doc()))
    args = [a.replace("$(POD_IP)", "10.0.0.7") for a in container()["args"]]
    assert MOUNTED in args and container()["command"] == ["koord-scheduler"]
    assert MOUNTED.split("=", 1)[1].startswith(container()["volumeMounts"][0]["mountPath"])
    argv = [a for a in args if a != MOUNTED] + [f"--config={path}", "--list-plugins"]
    result = CliRunner().invoke(cli.main, argv)
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split()[-1] for line in result.output.splitlines()[1:]}
    where = set(rows["LoadAwareScheduling"].split(","))
    assert {f"koord-scheduler:{p}" for p in ("preFilter", "filter", "score", "reserve")} <= where
    assert "--addr=10.0.0.7:10251" in args
    (port,) = container()["ports"]
    assert port["containerPort"] == 10251
    probe = container()["readinessProbe"]["httpGet"]
    assert probe == {"path": "/healthz", "port": port["name"]}


def test_the_configuration_loads_and_names_the_lease_the_role_grants() -> None:
    conf = config.parse_configuration(config_doc(), registered=frozenset(plugin_registry().names()))
    (profile,) = conf.profiles
    assert profile.scheduler_name == "koord-scheduler"  # beside kube-scheduler, not instead of it
    assert conf.leader_elect and conf.election["resourceNamespace"] == NS
    role = one("koord-scheduler-rbac.yaml", "Role")
    assert role["metadata"]["namespace"] == NS
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert [r["resourceNames"] for r in named] == [[conf.election["resourceName"]]]
    lease, renew = conf.election["leaseDuration"], conf.election["renewDeadline"]
    assert lease - renew > 3.0  # the default --request-timeout fits in the margin
    env = {e["name"] for e in container()["env"]}
    assert "POD_NAME" in env  # the identity in the Lease, one per replica


def test_service_account_and_bindings_agree() -> None:
    sa = one("koord-scheduler-rbac.yaml", "ServiceAccount")
    subject = [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NS}]
    assert one("koord-scheduler-rbac.yaml", "ClusterRoleBinding")["subjects"] == subject
    assert one("koord-scheduler-rbac.yaml", "RoleBinding")["subjects"] == subject
    pod_spec = one("koord-scheduler.yaml", "Deployment")["spec"]["template"]["spec"]
    assert pod_spec["serviceAccountName"] == sa["metadata"]["name"]
    assert all("*" not in json.dumps(r) for kind in ("ClusterRole", "Role") for r in rules(kind))


def test_the_rbac_is_kube_schedulers_plus_nodemetrics_and_the_prebind_patch() -> None:
    reads = {(g, r) for v, g, r in granted() if v in READ_VERBS and r != "leases"}
    assert reads - KUBE_SCHEDULER_READS == {("slo.koordinator.sh", "nodemetrics")}
    writes = {a for a in granted() if a[0] not in READ_VERBS and a[2] != "leases"}
    assert writes - KUBE_SCHEDULER_WRITES == {("patch", "", "pods")}


def test_the_rbac_lets_koord_scheduler_do_its_work_and_grants_no_unused_write(tmp_path: Path) -> None:
    # A kubelet confirms deletions, so the preemption victim goes and the preemptor takes its room.
    # The profile enables Reservation: its CRD and its RBAC (reservation-rbac.yaml) are applied beside.
    crds = (*DEFAULT_CRDS, DEPLOY / "crds" / "scheduling.koordinator.sh_reservations.yaml")
    with APIServer(crds=crds, authorization=True, kubelet_auto_confirm=True) as server:
        server.store.create("namespaces", {"metadata": {"name": NS}}, keep_status=False)
        server.apply(DEPLOY / "koord-scheduler-rbac.yaml", DEPLOY / "reservation-rbac.yaml")
        # Room for two pods (and CPU to spare, so that LoadAwareScheduling lets them in).
        server.store.create("nodes", objects.node("n1", cpu="32", pods="2"))
        server.store.create("nodemetrics", objects.node_metric("n1", update_time=time.time(), cpu_milli=100))
        for name, cpu in (("fits", "1"), ("too-big", "64")):
            pod = objects.pod(name, requests={"cpu": cpu}, scheduler_name="koord-scheduler")
            del pod["metadata"]["uid"]
            server.store.create("pods", pod, keep_status=False)
        low = objects.pod("low", requests={"cpu": "1"}, node_name="n1", priority=0, phase="Running")
        del low["metadata"]["uid"]
        server.store.create("pods", low, keep_status=False)
        ks = KoordSchedulerProcess(
            tmp_path, server, config_doc(), elect=True, token=server.token_for(NS, "koord-scheduler")
        )
        try:
            assert wait_until(lambda: node_of(server, "fits") == "n1", 60, step=0.05), ks.log()[-3000:]
            assert wait_until(lambda: condition(server, "too-big").get("status") == "False", 30, step=0.05)
            assert wait_until(lambda: events_for(server, "fits", "Scheduled"), 30, step=0.05)
            assert wait_until(lambda: events_for(server, "too-big", "FailedScheduling"), 30, step=0.05)
            # n1 holds two pods now: a pod of higher priority preempts (deletes) one of them.
            high = objects.pod("high", requests={"cpu": "1"}, priority=1000, scheduler_name="koord-scheduler")
            del high["metadata"]["uid"]
            server.store.create("pods", high, keep_status=False)
            assert wait_until(lambda: node_of(server, "high") == "n1", 60, step=0.05), ks.log()[-3000:]
        finally:
            code = ks.stop()
        assert code == 0, ks.log()[-3000:]
        ours = [r for r in server.requests if r.headers.get("User-Agent", "").startswith("koord-scheduler/")]
    denied = [(r.method, r.path, r.status) for r in ours if r.status == 403]
    assert not denied, denied
    made = {(a.verb, a.group, a.resource) for a in map(request_attrs, ours)}
    assert {
        ("create", "", "pods/binding"),
        ("patch", "", "pods/status"),
        ("create", "events.k8s.io", "events"),
        ("delete", "", "pods"),
        ("list", "", "pods"),
        ("watch", "", "nodes"),
        ("watch", "slo.koordinator.sh", "nodemetrics"),
        ("create", "coordination.k8s.io", "leases"),
        ("update", "coordination.k8s.io", "leases"),
    } <= made
    # Events are patched only when one repeats; pods only when a PreBind plugin changes them
    unused = sorted(
        g
        for g in granted() - made
        if g[0] not in READ_VERBS and g not in {("patch", "events.k8s.io", "events"), ("patch", "", "pods")}
    )
    assert not unused, f"write verbs koord-scheduler never uses: {unused}"
