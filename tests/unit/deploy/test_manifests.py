"""The DaemonSet manifests: they parse, the real CLI accepts the agent's args, host paths are mounted,
the NodeSLO example passes both the CRD schema and the agent's own validation, the scrape targets exist."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from koordlet import cli
from koordlet.config import Configuration
from koordlet.qosmanager import loader
from koordshared.apis.slo import nodeslo
from koordshared.apis.slo import validate as slovalidate
from tests import crdschema
from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy" / "daemonset"
NODESLO_CRD = DEPLOY / "crds" / "slo.koordinator.sh_nodeslos.yaml"
MANIFESTS = sorted(DEPLOY.glob("*.yaml"))
SAMPLE = {"status.podIP": "10.244.1.7", "spec.nodeName": "node-a"}
"""Values the kubelet would put into fieldRef env vars, for expanding ``$(VAR)`` in args."""


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d is not None]


def one(name: str, kind: str) -> dict[str, Any]:
    found = [d for d in docs(name) if d["kind"] == kind]
    assert len(found) == 1, f"{name}: want one {kind}, found {len(found)}"
    return found[0]


def pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = one("koordlet.yaml", "DaemonSet")["spec"]["template"]["spec"]
    return spec


def container() -> dict[str, Any]:
    (c,) = pod_spec()["containers"]
    return dict(c)


def expanded_env(c: dict[str, Any]) -> dict[str, str]:
    """The container's env as the kubelet would set it, with fieldRefs taken from :data:`SAMPLE`."""
    env: dict[str, str] = {}
    for var in c.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            env[var["name"]] = SAMPLE[var["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def expand(arg: str, env: dict[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion in args; an undefined variable is a test failure, not a literal."""

    def sub(m: re.Match[str]) -> str:
        assert m.group(1) in env, f"arg {arg!r} refers to undefined env var {m.group(1)}"
        return env[m.group(1)]

    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, arg)


def run_cli(args: list[str], env: dict[str, str]) -> Any:
    entries = loader.discover()
    argv = cli.normalize_args(["run", *args], entries)
    return CliRunner().invoke(cli.build_cli(entries), argv, env=env, catch_exceptions=False)


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_manifest_parses_into_kubernetes_objects(path: Path) -> None:
    objs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert objs
    for obj in objs:
        assert obj.get("apiVersion") and obj.get("kind") and obj.get("metadata", {}).get("name"), obj


def test_the_manifest_set_is_the_one_documented() -> None:
    assert {p.name for p in MANIFESTS} == {
        "koordlet.yaml",
        "rbac.yaml",
        "nodeslo-example.yaml",
        "prometheus-scrape.yaml",
    }


def test_daemonset_args_are_accepted_by_the_real_cli(captured: list[Configuration]) -> None:
    c = container()
    env = expanded_env(c)
    args = [expand(a, env) for a in c["args"]]
    result = run_cli(args, env)
    assert result.exit_code == 0, result.output
    (cfg,) = captured
    assert cfg.node_name == SAMPLE["spec.nodeName"]  # NODE_NAME from spec.nodeName reaches the agent
    assert cfg.host == SAMPLE["status.podIP"] and cfg.port == 9316
    assert str(cfg.paths.cgroup_root) == "/host-cgroup" and str(cfg.paths.proc_root) == "/proc"
    assert str(cfg.paths.sys_root) == "/host-sys" and str(cfg.paths.sys_fs_root) == "/host-sys-fs"
    assert str(cfg.paths.var_run_root) == "/host-var-run"
    assert str(cfg.cache.tsdb_path) == "/metric-data"
    # the prediction checkpoints default next to the metric cache: where the DaemonSet mounts the host dir
    assert cfg.prediction.checkpoint_path == "/prediction-checkpoints"
    mounts = {m["mountPath"].rstrip("/"): m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec()["volumes"]}
    host = volumes[mounts["/prediction-checkpoints"]]["hostPath"]["path"]
    assert host == "/var/run/koordlet/prediction-checkpoints"  # Koordinator's chart keeps them there too


def test_a_misspelled_flag_would_fail_the_same_check(captured: list[Configuration]) -> None:
    # Guards the check above: the path it takes must reject what the kubelet would crash-loop on.
    env = expanded_env(container())
    assert run_cli(["--cgroup-rootdir=/host-cgroup/"], env).exit_code == 2
    assert run_cli(["--addr=10.244.1.7"], env).exit_code == 2  # no port
    assert run_cli(["--feature-gates=BECPUSupress=true"], env).exit_code == 2
    assert not captured


def test_feature_gates_in_args_name_real_gates(captured: list[Configuration]) -> None:
    env = expanded_env(container())
    gates = [a for a in container()["args"] if a.startswith("--feature-gates=")]
    assert len(gates) == 1
    assert run_cli([gates[0]], env).exit_code == 0
    # The NodeSLO example turns on suppression and memory eviction: their gates must be on too.
    enabled = dict(kv.split("=") for kv in gates[0].partition("=")[2].split(","))
    assert enabled.get("BECPUSuppress") == "true" and enabled.get("BEMemoryEvict") == "true"


def test_every_volume_mount_has_a_volume_and_every_volume_is_mounted() -> None:
    volumes = {v["name"]: v for v in pod_spec()["volumes"]}
    mounts = container()["volumeMounts"]
    assert len({m["mountPath"] for m in mounts}) == len(mounts)
    for m in mounts:
        assert m["name"] in volumes, f"volumeMount {m['name']} has no volume"
    assert {m["name"] for m in mounts} == set(volumes)


def test_host_root_flags_point_into_mounts_of_the_matching_host_paths() -> None:
    mounts = {m["mountPath"].rstrip("/"): m for m in container()["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec()["volumes"]}
    want_host = {
        "cgroup-root-dir": "/sys/fs/cgroup",
        "sys-root-dir": "/sys",
        "sys-fs-root-dir": "/sys/fs",
        "var-run-root-dir": "/var/run",
        "var-lib-kubelet-dir": "/var/lib/kubelet",
    }
    args = dict(a[2:].split("=", 1) for a in container()["args"])
    for flag, host in want_host.items():
        mount = mounts[args[flag].rstrip("/")]
        assert volumes[mount["name"]]["hostPath"]["path"].rstrip("/") == host, flag
    assert not mounts[args["cgroup-root-dir"].rstrip("/")].get("readOnly")  # cgroup writes
    assert mounts[args["var-lib-kubelet-dir"].rstrip("/")].get("readOnly") is True  # read, never written
    assert "emptyDir" in volumes[mounts[args["tsdb-path"].rstrip("/")]["name"]]
    # /proc is not mounted: hostPID makes the container's own /proc the host's.
    assert args["proc-root-dir"].rstrip("/") == "/proc" and pod_spec()["hostPID"] is True


def test_pod_security_and_scheduling_posture() -> None:
    spec, c = pod_spec(), container()
    assert spec.get("hostNetwork", False) is False
    assert spec["terminationGracePeriodSeconds"] == 10
    assert {"operator": "Exists"} in spec["tolerations"]
    sa = one("koordlet.yaml", "ServiceAccount")
    assert spec["serviceAccountName"] == sa["metadata"]["name"]
    ds = one("koordlet.yaml", "DaemonSet")
    assert sa["metadata"]["namespace"] == ds["metadata"]["namespace"] == "koordinator-system"
    assert one("koordlet.yaml", "Namespace")["metadata"]["name"] == "koordinator-system"
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert c["securityContext"].get("readOnlyRootFilesystem") is True
    env = {e["name"]: e for e in c["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"


def test_resources_request_cpu_and_set_no_cpu_limit() -> None:
    res = container()["resources"]
    assert res["requests"] == {"cpu": "100m", "memory": "128Mi"}
    assert res["limits"] == {"memory": "256Mi"}


def test_metrics_endpoint_is_not_all_interfaces_and_probes_reach_it() -> None:
    c = container()
    addr = next(a.partition("=")[2] for a in c["args"] if a.startswith("--addr="))
    host, _, port = addr.rpartition(":")
    assert host not in ("", "0.0.0.0", "[::]", "::")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports["metrics"] == int(port)
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in (c["livenessProbe"], c["readinessProbe"]):
        assert probe["httpGet"]["port"] in ("metrics", int(port))
    if host.startswith("127."):  # the kubelet probes the pod IP, so a loopback bind would fail them
        pytest.fail("probes cannot reach a loopback-only endpoint")


def test_nodeslo_example_passes_the_crd_schema_and_the_agents_validation() -> None:
    obj = one("nodeslo-example.yaml", "NodeSLO")
    crd = yaml.safe_load(NODESLO_CRD.read_text())
    group, version = obj["apiVersion"].split("/")
    assert crd["spec"]["group"] == group and version in {v["name"] for v in crd["spec"]["versions"]}
    crdschema.validate(obj, NODESLO_CRD)  # raises CRDValidationError, listing every violation
    slovalidate.validate_spec(obj["spec"])
    slo = nodeslo.build(obj["spec"])
    th = slo.resource_used_threshold_with_be
    section = obj["spec"]["resourceUsedThresholdWithBE"]
    assert th.enable is True
    assert th.cpu_suppress_threshold_percent == section["cpuSuppressThresholdPercent"]
    assert th.memory_evict_threshold_percent == section["memoryEvictThresholdPercent"]
    assert th.memory_evict_lower_percent == section["memoryEvictLowerPercent"]


def test_schema_check_of_the_example_is_not_vacuous() -> None:
    obj = one("nodeslo-example.yaml", "NodeSLO")
    obj["spec"]["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] = 101
    with pytest.raises(crdschema.CRDValidationError):
        crdschema.validate(obj, NODESLO_CRD)


def test_pod_monitor_selects_the_daemonset_pods_and_their_metrics_port() -> None:
    pm = one("prometheus-scrape.yaml", "PodMonitor")
    ds = one("koordlet.yaml", "DaemonSet")
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert pm["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert ds["metadata"]["namespace"] in pm["spec"]["namespaceSelector"]["matchNames"]
    ports = {p["name"] for p in container()["ports"]}
    for ep in pm["spec"]["podMetricsEndpoints"]:
        assert ep["port"] in ports and ep.get("path", "/metrics") == "/metrics"


def test_the_pod_monitor_sends_a_token_that_may_read_metrics_only() -> None:
    # The agent reviews every caller (--authentication-token-webhook, Webhook mode); the PodMonitor's
    # token is a ServiceAccount's of its own whose only grant is "get /metrics".
    pm = one("prometheus-scrape.yaml", "PodMonitor")
    (endpoint,) = pm["spec"]["podMetricsEndpoints"]
    ref = endpoint["authorization"]["credentials"]
    secret = one("prometheus-scrape.yaml", "Secret")
    assert ref["name"] == secret["metadata"]["name"] and ref["key"] == "token"
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert secret["metadata"]["namespace"] == pm["metadata"]["namespace"]
    account = secret["metadata"]["annotations"]["kubernetes.io/service-account.name"]
    binding = one("prometheus-scrape.yaml", "ClusterRoleBinding")
    assert {
        "kind": "ServiceAccount",
        "name": account,
        "namespace": secret["metadata"]["namespace"],
    } in binding["subjects"]
    role = one("prometheus-scrape.yaml", "ClusterRole")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    args = container()["args"]
    assert "--authentication-token-webhook=true" in args and "--authorization-mode=Webhook" in args
