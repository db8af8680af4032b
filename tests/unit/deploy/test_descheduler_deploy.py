"""deploy/descheduler: the manifests parse and agree with each other and with the real CLI; the
configuration is Koordinator's shipped one with LowNodeLoad enabled; the RBAC, enforced by the test API
server, lets the descheduler do everything it does (caches, evictions, Events, its Lease) and grants no
write it does not make."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from koord.descheduler import cli
from koord.descheduler.config import parse_configuration
from koord.descheduler.evictor.args import parse_args as mc_args
from koord.descheduler.plugins.lownodeload.args import parse_args as lnl_args
from koordshared.kube.leaderelection import ElectionConfig
from koordshared.testing import FakeClock
from tests.apiserver import APIServer, Request
from tests.apiserver.fixtures import DEFAULT_CRDS
from tests.cluster.deschedulerharness import running_descheduler
from tests.support.paths import ROOT
from tests.unit.deploy.test_manager_rbac import READ_VERBS, Attrs, request_attrs
from tests.unit.koord.descheduler.evictor.test_eviction_api import hot_pods, populate
from tests.unit.koord.descheduler.evictor.test_jobs import JOBS, RESERVATION_CRD, RESERVATIONS, place, settle

DEPLOY = ROOT / "deploy" / "descheduler"
CRDS = DEPLOY / "crds"
NS = "koordinator-system"


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d is not None]


def one(name: str, kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs(name) if d["kind"] == kind]
    return found


def container() -> dict[str, Any]:
    (c,) = one("koord-descheduler.yaml", "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(c)


def config_doc() -> dict[str, Any]:
    cm = one("koord-descheduler.yaml", "ConfigMap")
    out: dict[str, Any] = yaml.safe_load(cm["data"]["koord-descheduler-config"])
    return out


def test_the_cli_accepts_the_deployment_args_and_configuration(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(config_doc()))
    args = [a.replace("$(POD_IP)", "10.0.0.7") for a in container()["args"]]
    mounted = "--config=/etc/koord-descheduler/koord-descheduler-config"
    assert mounted in args
    assert mounted.split("=", 1)[1].startswith(container()["volumeMounts"][0]["mountPath"])
    argv = [a for a in args if a != mounted] + [f"--config={config}", "--list-plugins"]
    result = CliRunner().invoke(cli.main, argv)
    assert result.exit_code == 0, result.output
    assert "LowNodeLoad" in result.output and "koord-descheduler:balance" in result.output
    assert "koord-descheduler:evict,koord-descheduler:filter" in result.output
    assert container()["command"] == ["koord-descheduler"]
    assert container()["ports"][0]["containerPort"] == 10251


def test_configuration_is_koordinators_shipped_one_with_lownodeload_enabled() -> None:
    conf = parse_configuration(config_doc())
    (profile,) = conf.profiles
    assert profile.enabled("balance") == ("LowNodeLoad",)
    assert profile.enabled("evict") == profile.enabled("filter") == ("MigrationController",)
    assert conf.interval == 10.0 and not conf.dry_run
    lnl = lnl_args(profile.plugin_config["LowNodeLoad"])
    pool = lnl.pools[0]
    assert (pool.low, pool.high) == ({"cpu": 45, "memory": 55}, {"cpu": 75, "memory": 80})
    assert lnl.exclude_namespaces == {"kube-system", NS}
    mc = mc_args(profile.plugin_config["MigrationController"])
    assert (mc.evict_qps, mc.evict_burst, mc.max_migrating_per_node) == (10.0, 1, 2)


def test_service_account_and_bindings_agree() -> None:
    sa = one("rbac.yaml", "ServiceAccount")
    subject = [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NS}]
    assert one("rbac.yaml", "ClusterRoleBinding")["subjects"] == subject
    assert one("rbac.yaml", "RoleBinding")["subjects"] == subject
    assert (
        one("rbac.yaml", "Role")["metadata"]["namespace"]
        == config_doc()["leaderElection"]["resourceNamespace"]
    )
    pod_spec = one("koord-descheduler.yaml", "Deployment")["spec"]["template"]["spec"]
    assert pod_spec["serviceAccountName"] == sa["metadata"]["name"]
    assert all("*" not in json.dumps(r) for d in docs("rbac.yaml") for r in d.get("rules", []))


def rbac_config() -> dict[str, Any]:
    config = config_doc()
    config["profiles"][0]["pluginConfig"][0]["args"].update(
        {"skipCheckExpectedReplicas": True, "priorityThreshold": {"name": "system-cluster-critical"}}
    )
    config["profiles"][0]["pluginConfig"][1]["args"]["anomalyCondition"] = {"consecutiveAbnormalities": 1}
    config["profiles"][0]["pluginConfig"][1]["args"]["lowThresholds"] = {"cpu": 0.5, "memory": 55}
    config["profiles"][0]["pluginConfig"][1]["args"]["highThresholds"] = {"cpu": 1, "memory": 80}
    return config


ELECTION = ElectionConfig(
    namespace=NS,
    name="koord-descheduler",
    identity="rbac",
    lease_duration=3,
    renew_deadline=2,
    retry_period=0.2,
)


def evicting_directly() -> list[Request]:
    """The traffic of a round evicting two pods at once (the cluster serves no PodMigrationJobs)."""
    with APIServer(crds=DEFAULT_CRDS, authorization=True, kubelet_auto_confirm=True) as server:
        server.store.create("namespaces", {"metadata": {"name": NS}}, keep_status=False)
        server.apply(DEPLOY / "rbac.yaml")
        populate(server)
        identity = server.client_config(f"{NS}/koord-descheduler")
        with running_descheduler(identity, rbac_config(), election=ELECTION) as app:
            assert app.run_round() == "ok"
            app.events.flush()
        assert len(hot_pods(server)) == 101 - 2, "two pods evicted as the ServiceAccount"
        return [r for r in server.requests if r.headers.get("User-Agent", "").startswith("koord-descheduler")]


def through_jobs() -> list[Request]:
    """The traffic of two PodMigrationJobs: one carried out (its Reservation placed, the pod evicted),
    one timed out (its Reservation deleted), both scavenged."""
    clock = FakeClock(wall_start=time.time())
    crds = (*DEFAULT_CRDS, CRDS / "scheduling.koordinator.sh_podmigrationjobs.yaml", RESERVATION_CRD)
    with APIServer(crds=crds, authorization=True, kubelet_auto_confirm=True) as server:
        server.store.clock = clock.wall
        server.store.create("namespaces", {"metadata": {"name": NS}}, keep_status=False)
        server.apply(DEPLOY / "rbac.yaml")
        populate(server)
        config = rbac_config()
        config["profiles"][0]["pluginConfig"][0]["args"]["schedulerNames"] = ["default-scheduler"]
        identity = server.client_config(f"{NS}/koord-descheduler")
        with running_descheduler(
            identity, config, election=ELECTION, clock=clock.wall, monotonic=clock
        ) as app:
            assert app.run_round() == "ok"
            mc = app.frameworks[0].plugins["MigrationController"]
            for _ in range(3):
                settle(server, app)
                mc.tick()
            settle(server, app)
            first, _ = server.store.list(JOBS)[0]
            place(server, first["spec"]["reservationOptions"]["reservationRef"]["name"], "cold-1")
            settle(server, app)
            mc.tick()
            clock.advance(301)  # the second times out
            settle(server, app)
            mc.tick()
            clock.advance(360)  # both scavenged
            settle(server, app)
            mc.tick()
            app.events.flush()
        assert len(hot_pods(server)) == 101 - 1, "one pod evicted by its job"
        assert server.store.list(JOBS)[0] == [] and server.store.list(RESERVATIONS)[0] == []
        return [r for r in server.requests if r.headers.get("User-Agent", "").startswith("koord-descheduler")]


def test_the_rbac_lets_the_descheduler_do_its_work_and_grants_no_unused_write() -> None:
    requests = evicting_directly() + through_jobs()
    denied = [(r.method, r.path, r.status) for r in requests if r.status == 403]
    assert not denied, denied
    # discovery (is the PodMigrationJob CRD served?) is open to every authenticated user
    traffic = {request_attrs(r) for r in requests if r.path != "/apis/scheduling.koordinator.sh/v1alpha1"}
    made = {(a.verb, a.group, a.resource) for a in traffic}
    assert {
        ("create", "", "pods/eviction"),
        ("create", "events.k8s.io", "events"),
        ("get", "scheduling.k8s.io", "priorityclasses"),
        ("create", "scheduling.koordinator.sh", "podmigrationjobs"),
        ("update", "scheduling.koordinator.sh", "podmigrationjobs/status"),
        ("create", "scheduling.koordinator.sh", "reservations"),
        ("delete", "scheduling.koordinator.sh", "reservations"),
    } <= made
    assert {("create", "coordination.k8s.io", "leases"), ("update", "coordination.k8s.io", "leases")} <= made
    granted = {
        (verb, group, resource)
        for d in docs("rbac.yaml")
        for r in d.get("rules", [])
        for verb in r["verbs"]
        for group in r["apiGroups"]
        for resource in r["resources"]
    }
    # an Event is patched only when the same one repeats (covered by the cluster layer's Event tests)
    repeat = ("patch", "events.k8s.io", "events")
    unused = sorted(g for g in granted - made if g[0] not in READ_VERBS and g != repeat)
    assert not unused, f"write verbs the descheduler never uses: {unused}"
    assert all(isinstance(a, Attrs) for a in traffic)
