"""deploy/manager: the Deployment's args pass the real koord-manager CLI, its probes reach the HTTP
endpoint, two replicas elect a leader, and the example ConfigMap parses (every key, no warnings) into
NodeSLOs that pass the CRD schema and the agent's validation."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from koord.manager import cli as manager_cli
from koord.manager import config as manager_config
from koord.manager.config import ManagerConfig
from koordshared.apis.configuration import slocontroller as sloconfig
from koordshared.apis.slo import nodeslo
from koordshared.kube import process
from tests import crdschema
from tests.support.paths import ROOT
from tests.unit.deploy.test_manifests import NODESLO_CRD, expand

DEPLOY = ROOT / "deploy" / "manager"
SAMPLE = {
    "metadata.name": "koord-manager-7d9f-abcde",
    "metadata.namespace": "koordinator-system",
    "status.podIP": "10.244.3.9",
}


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d is not None]


def one(name: str, kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs(name) if d["kind"] == kind]
    return found


def container() -> dict[str, Any]:
    (c,) = one("koord-manager.yaml", "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(c)


def env_of(c: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v.get("value") or SAMPLE[v["valueFrom"]["fieldRef"]["fieldPath"]] for v in c["env"]}


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[ManagerConfig]:
    """koord-manager parses and validates its flags, and stops there."""
    seen: list[ManagerConfig] = []
    monkeypatch.setattr(process, "main_guard", lambda run: None)
    real_build = manager_config.build

    def build(options: Any, client_configuration: Any = None) -> ManagerConfig:
        cfg = real_build(options, client_configuration)
        seen.append(cfg)
        return cfg

    monkeypatch.setattr(manager_config, "build", build)
    return seen


def run(args: list[str], env: dict[str, str]) -> Any:
    return CliRunner().invoke(manager_cli.main, args, env=env, catch_exceptions=False)


def test_manifest_set_and_objects() -> None:
    assert {p.name for p in DEPLOY.glob("*.yaml")} == {
        "koord-manager.yaml",
        "priorityclasses.yaml",
        "rbac.yaml",
        "slo-controller-config.yaml",
        "webhooks.yaml",
    }
    kinds = {d["kind"] for p in DEPLOY.glob("*.yaml") for d in docs(p.name)}
    assert kinds == {
        "ServiceAccount",
        "Deployment",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "PriorityClass",
        "Service",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    }


def test_deployment_args_are_accepted_by_the_real_cli(captured: list[ManagerConfig]) -> None:
    c = container()
    assert c["command"] == ["koord-manager"]
    env = env_of(c)
    result = run([expand(a, env) for a in c["args"]], env)
    assert result.exit_code == 0, result.output
    (cfg,) = captured
    assert cfg.addr == process.Address(SAMPLE["status.podIP"], 8080)
    assert cfg.leader_election and cfg.election.identity == SAMPLE["metadata.name"]  # POD_NAME
    assert (cfg.election.namespace, cfg.election.name) == ("koordinator-system", "koordinator-manager")
    assert cfg.request_timeout < cfg.election.margin
    assert set(cfg.controllers) == {"nodemetric", "nodeslo", "noderesource"}


def test_bad_flags_fail_the_same_check(captured: list[ManagerConfig]) -> None:
    env = env_of(container())
    assert run(["--controlers=*"], env).exit_code == 2
    assert run(["--controllers=nodemetric,descheduler"], env).exit_code == 2
    assert run(["--addr=10.0.0.1"], env).exit_code == 2
    # A request timeout that would outlive the leadership margin is refused.
    assert run(["--request-timeout=6s"], env).exit_code == 2
    assert not captured


def test_two_replicas_never_both_down_and_probes_reach_the_endpoint() -> None:
    deploy = one("koord-manager.yaml", "Deployment")
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    c = container()
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    addr = next(a for a in c["args"] if a.startswith("--addr="))
    assert addr.endswith(f":{ports['metrics']}") and "127.0.0.1" not in addr
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"] and sc["capabilities"]["drop"] == ["ALL"]


def test_example_configmap_parses_and_renders_valid_nodeslos() -> None:
    cm = one("slo-controller-config.yaml", "ConfigMap")
    data = cm["data"]
    assert set(data) == {sloconfig.COLOCATION_CONFIG_KEY, *sloconfig.NODESLO_CONFIG_KEYS}
    cfg = sloconfig.parse_colocation_config(data[sloconfig.COLOCATION_CONFIG_KEY])
    assert cfg.cluster.enable and not cfg.warnings and len(cfg.node_configs) == 1
    configs = {key: sloconfig.parse_key(key, data[key]) for key in sloconfig.NODESLO_CONFIG_KEYS}
    for labels in ({}, {"pool": "latency-critical"}):
        spec = sloconfig.render_spec(configs, labels, {})
        obj = {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeSLO",
            "metadata": {"name": "n"},
            "spec": spec,
        }
        crdschema.validate(json.loads(json.dumps(obj)), NODESLO_CRD)
        nodeslo.build(spec)  # the agent's validation and merge
    critical = sloconfig.render_spec(configs, {"pool": "latency-critical"}, {})
    assert critical["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 50
