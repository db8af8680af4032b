"""deploy/scheduler: the extender's manifests parse and agree with each other and with the real CLI; the
profile spells out the defaults; kube-scheduler's extenders entry is what the extender serves; the
ClusterRole allows exactly the extender's recorded API traffic."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from koord.scheduler.extender import cli
from koord.scheduler.framework.profile import parse_profile
from koord.scheduler.plugins.loadaware.args import parse_args
from koordshared.kube.client import make_api_client, request
from koordshared.kube.process import parse_seconds
from koordshared.testing import objects
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.cluster.extenderharness import running_extender
from tests.cluster.kubescheduler import ExtenderConfig, HTTPExtender
from tests.support.paths import ROOT
from tests.unit.deploy.test_rbac import READ_VERBS, allows, attributes, granted

DEPLOY = ROOT / "deploy" / "scheduler"


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d is not None]


def one(name: str, kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs(name) if d["kind"] == kind]
    return found


def container() -> dict[str, Any]:
    (c,) = one("extender.yaml", "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(c)


def args() -> list[str]:
    return [a.replace("$(POD_IP)", "10.0.0.7") for a in container()["args"]]


def profile_doc() -> dict[str, Any]:
    out: dict[str, Any] = yaml.safe_load(one("extender.yaml", "ConfigMap")["data"]["config.yaml"])
    return out


def test_the_cli_accepts_the_deployment_args_and_profile(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(profile_doc()))
    mounted = "--config=/etc/koord-scheduler-extender/config.yaml"
    assert mounted in args()
    mount = container()["volumeMounts"][0]["mountPath"]
    assert mounted.split("=", 1)[1].startswith(mount)
    argv = [a for a in args() if a != mounted] + [f"--config={config}", "--list-plugins"]
    result = CliRunner().invoke(cli.main, argv)
    assert result.exit_code == 0, result.output
    points = r"preFilter,filter,preScore,score\(weight 1\),reserve"
    row = re.compile(rf"^LoadAwareScheduling +builtin +{points}$", re.M)
    assert row.search(result.output), result.output
    assert container()["command"] == ["koord-scheduler-extender"]


def test_a_negative_duration_flag_is_refused_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(profile_doc()))
    argv = [f"--config={config}", "--list-plugins"]
    assert CliRunner().invoke(cli.main, argv).exit_code == 0
    result = CliRunner().invoke(cli.main, [*argv, "--bind-timeout=-1"])
    assert result.exit_code == 2 and "--bind-timeout '-1' is negative" in result.output


def test_profile_spells_out_the_code_defaults() -> None:
    profile = parse_profile(profile_doc())
    spelled = profile.plugin_config["LoadAwareScheduling"]
    assert parse_args(spelled) == parse_args(None)
    assert set(spelled) >= {"usageThresholds", "filterExpiredNodeMetrics", "nodeMetricExpirationSeconds"}


def test_kube_scheduler_extender_entry_matches_the_extender() -> None:
    (ks,) = docs("kube-scheduler-config.yaml")
    assert ks["kind"] == "KubeSchedulerConfiguration"
    (ext,) = ks["extenders"]
    service = one("extender.yaml", "Service")
    meta, port = service["metadata"], service["spec"]["ports"][0]["port"]
    assert ext["urlPrefix"] == f"http://{meta['name']}.{meta['namespace']}.svc:{port}"
    assert (ext["filterVerb"], ext["prioritizeVerb"], ext["bindVerb"]) == ("filter", "prioritize", "bind")
    assert ext["nodeCacheCapable"] is True and ext["ignorable"] is True
    assert ext["weight"] > 0  # kube-scheduler's validation when prioritizeVerb is set
    bind_timeout = next(a for a in args() if a.startswith("--bind-timeout=")).split("=", 1)[1]
    assert parse_seconds(bind_timeout, "--bind-timeout") < parse_seconds(ext["httpTimeout"], "httpTimeout")
    assert "--addr=10.0.0.7:10262" in args()
    assert container()["ports"][0]["containerPort"] == 10262


def test_service_account_and_binding_agree() -> None:
    sa = one("rbac.yaml", "ServiceAccount")
    binding = one("rbac.yaml", "ClusterRoleBinding")
    pod_spec = one("extender.yaml", "Deployment")["spec"]["template"]["spec"]
    assert pod_spec["serviceAccountName"] == sa["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": sa["metadata"]["namespace"]}
    ]


def test_cluster_role_allows_exactly_the_recorded_traffic(api_server: APIServer, tmp_path: Path) -> None:  # noqa: F811
    api_server.store.create("nodes", objects.node("n1"))
    api = make_api_client(client_configuration=api_server.client_config())
    try:
        created = objects.pod("p")
        del created["metadata"]["uid"]
        made = request(api, "create", "POST", "/api/v1/namespaces/default/pods", body=created)
        assert api_server.wait_for_requests(lambda r: r.method == "POST" and r.path.endswith("/pods"))
        before = len(api_server.requests)  # what follows is the extender's traffic alone
        with running_extender(api_server.client_config()) as app:
            ext = HTTPExtender(
                ExtenderConfig(url_prefix=f"http://127.0.0.1:{app.server.port}", bind_verb="bind")
            )
            go_pod = {"metadata": made["metadata"], "spec": made["spec"], "status": {}}
            assert ext.filter(go_pod, [objects.node("n1")])[0]
            ext.bind(go_pod, "n1")
        # the server logs a request after answering it; the watches end when the extender stops
        assert api_server.wait_for_requests(lambda r: r.path.endswith("/binding"), timeout=5)
        api_server.wait_for_requests(lambda r: r.query.get("watch") == "true", count=3, timeout=5)
    finally:
        api.close()
    traffic = {attributes(r) for r in api_server.requests[before:]}  # watches are logged when they end
    (role,) = [d for d in docs("rbac.yaml") if d["kind"] == "ClusterRole"]
    rules = role["rules"]
    denied = sorted((a.verb, a.group, a.resource) for a in traffic if not allows(rules, a))
    assert not denied, f"the ClusterRole denies: {denied}"
    assert {"nodes", "pods", "nodemetrics", "pods/binding"} <= {a.resource for a in traffic}
    assert {a.verb for a in traffic} == {"list", "watch", "create"}
    unused = sorted(
        (a.verb, a.group, a.resource) for a in granted(rules) if a not in traffic and a.verb not in READ_VERBS
    )
    assert not unused, f"write verbs the extender never uses: {unused}"
    assert all("*" not in json.dumps(r) for r in rules)
