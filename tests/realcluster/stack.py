"""Our stack on the real cluster: ``deploy/`` applied (CRDs, namespace, ServiceAccounts, RBAC, ConfigMaps,
the example NodeSLO), and each workload of ``deploy/`` run as the host processes its pod would be.

A workload's pod cannot run under the kubelet here (its image cannot be pulled), so its container is run
on the host as the pod spec says: the same command and arguments, ``$(VAR)`` references expanded from
the container's env, each volume's mount path replaced by what the kubelet would mount there (a
hostPath's host path, a ConfigMap's keys written as files, an emptyDir of its own), ``spec.replicas``
processes with their own ``POD_NAME``, and the API server reached with a token of the pod's
ServiceAccount from the real TokenRequest API, so a grant ``deploy/`` lacks fails as it would in a pod.
The agent runs as root with the node's cgroups, ``/proc`` and ``/sys``, as the DaemonSet's hostPID pod.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.realcluster.control import write_kubeconfig
from tests.realcluster.procs import Started, spawn

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
NAMESPACE = "koordinator-system"

CRD_DIRS = (
    DEPLOY / "daemonset" / "crds",
    DEPLOY / "manager" / "crds",
    DEPLOY / "scheduler" / "crds",
    DEPLOY / "descheduler" / "crds",
)
# Manifests whose objects the bring-up applies (workloads aside); the Prometheus Operator's PodMonitor
# and the extender (behind kube-scheduler, not run here) are left out.
MANIFESTS = (
    DEPLOY / "daemonset" / "koordlet.yaml",
    DEPLOY / "daemonset" / "rbac.yaml",
    DEPLOY / "manager" / "koord-manager.yaml",
    DEPLOY / "manager" / "rbac.yaml",
    DEPLOY / "manager" / "slo-controller-config.yaml",
    DEPLOY / "manager" / "priorityclasses.yaml",
    DEPLOY / "scheduler" / "koord-scheduler.yaml",
    DEPLOY / "scheduler" / "koord-scheduler-rbac.yaml",
    DEPLOY / "scheduler" / "coscheduling-rbac.yaml",
    DEPLOY / "scheduler" / "deviceshare-rbac.yaml",
    DEPLOY / "scheduler" / "elasticquota-rbac.yaml",
    DEPLOY / "scheduler" / "nodenumaresource-rbac.yaml",
    DEPLOY / "scheduler" / "reservation-rbac.yaml",
    DEPLOY / "descheduler" / "koord-descheduler.yaml",
    DEPLOY / "descheduler" / "rbac.yaml",
)
WORKLOAD_KINDS = ("Deployment", "DaemonSet")

# (manifest, workload name) in start order: the agent first, so the node reports before the cluster side
# computes from its reports.
WORKLOADS = (
    (DEPLOY / "daemonset" / "koordlet.yaml", "koordlet"),
    (DEPLOY / "manager" / "koord-manager.yaml", "koord-manager"),
    (DEPLOY / "scheduler" / "koord-scheduler.yaml", "koord-scheduler"),
    (DEPLOY / "descheduler" / "koord-descheduler.yaml", "koord-descheduler"),
)
_IMAGE_ENTRYPOINT = ("koordlet", "run")  # the Dockerfile's, for a container without a command
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def non_workload_objects() -> list[dict[str, Any]]:
    return [d for p in MANIFESTS for d in documents(p) if d.get("kind") not in WORKLOAD_KINDS]


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
    done = subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def apply_deploy(kubeconfig: Path, node: str) -> None:
    """CRDs (waited Established), then every other object of ``deploy/`` but the workloads, then the
    example NodeSLO named after the node."""
    for d in CRD_DIRS:
        kubectl(kubeconfig, "apply", "-f", str(d))
    kubectl(kubeconfig, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    stream = yaml.safe_dump_all(non_workload_objects())
    kubectl(kubeconfig, "apply", "-f", "-", stdin=stream)
    example = documents(DEPLOY / "daemonset" / "nodeslo-example.yaml")[0]
    example["metadata"]["name"] = node
    kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(example))


def service_account_token(kubeconfig: Path, name: str, namespace: str = NAMESPACE) -> str:
    """A bound token from the TokenRequest API, as the kubelet projects into a pod."""
    return kubectl(kubeconfig, "create", "token", name, "-n", namespace, "--duration=48h").strip()


@dataclass(frozen=True)
class HostRun:
    """One replica of a workload's container, as the host process it becomes."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    service_account: str
    files: Mapping[Path, str] = field(default_factory=dict)
    """Files to write before the start (ConfigMap volumes)."""


def _workload(manifest: Path, name: str) -> dict[str, Any]:
    for d in documents(manifest):
        if d.get("kind") in WORKLOAD_KINDS and d["metadata"]["name"] == name:
            return d
    raise LookupError(f"{manifest.name} has no workload {name!r}")


def _config_maps(manifest: Path) -> dict[str, dict[str, str]]:
    return {
        d["metadata"]["name"]: dict(d.get("data") or {})
        for d in documents(manifest)
        if d.get("kind") == "ConfigMap"
    }


def host_runs(
    manifest: Path,
    name: str,
    *,
    work: Path,
    node: str,
    host_paths: Mapping[str, Path],
    bin_dir: Path,
) -> Iterator[HostRun]:
    """The host processes of workload ``name`` in ``manifest``. ``host_paths`` redirects a hostPath the
    test cluster keeps elsewhere (the kubelet's root directory) or must not touch (``/var/run``)."""
    obj = _workload(manifest, name)
    pod = obj["spec"]["template"]["spec"]
    replicas = 1 if obj["kind"] == "DaemonSet" else int(obj["spec"].get("replicas", 1))
    config_maps = _config_maps(manifest)
    (container,) = pod["containers"]
    for i in range(replicas):
        pod_name = name if replicas == 1 else f"{name}-{i}"
        root = work / pod_name
        mounts: dict[str, Path] = {}
        files: dict[Path, str] = {}
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for m in container.get("volumeMounts", []):
            vol = volumes[m["name"]]
            if "hostPath" in vol:
                host = vol["hostPath"]["path"]
                target = next(
                    (p for prefix, p in host_paths.items() if host.rstrip("/") == prefix.rstrip("/")), None
                )
                mounts[m["mountPath"]] = target or Path(host)
            elif "configMap" in vol:
                d = root / "volumes" / m["name"]
                for key, text in config_maps[vol["configMap"]["name"]].items():
                    files[d / key] = text
                mounts[m["mountPath"]] = d
            else:  # emptyDir
                mounts[m["mountPath"]] = root / "volumes" / m["name"]
                mounts[m["mountPath"]].mkdir(parents=True, exist_ok=True)
        env = {
            "POD_NAME": pod_name,
            "POD_NAMESPACE": obj["metadata"]["namespace"],
            "POD_IP": "127.0.0.1",
            "NODE_NAME": node,
        }
        declared = {e["name"] for e in container.get("env", [])}
        env = {k: v for k, v in env.items() if k in declared or k == "POD_NAMESPACE"}

        def expand(arg: str, env: Mapping[str, str] = env, mounts: Mapping[str, Path] = mounts) -> str:
            arg = _VAR.sub(lambda mt: env.get(mt.group(1), mt.group(0)), arg)
            flag, sep, value = arg.partition("=")
            if not sep:
                flag, value = "", arg
            for mount, host in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
                inside = mount.rstrip("/")
                if value == inside or value.startswith(inside + "/"):
                    value = str(host) + value[len(inside) :]
                    break
            return f"{flag}={value}" if sep else value

        command = list(container.get("command") or _IMAGE_ENTRYPOINT)
        command[0] = str(bin_dir / command[0])
        args = [expand(a) for a in container.get("args", [])]
        # The HTTP port the pod would own is taken by another replica here: every process binds a free
        # loopback port and logs it.
        args = [re.sub(r"^(--addr=[^:]*):\d+$", r"\1:0", a) for a in args]
        yield HostRun(pod_name, (*command, *args), env, pod.get("serviceAccountName", "default"), files)


@dataclass
class Running:
    run: HostRun
    proc: Started
    kubeconfig: Path


def start(run: HostRun, *, work: Path, logs: Path, admin: Path, server: str, ca: Path) -> Running:
    for path, text in run.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    token = service_account_token(admin, run.service_account)
    kubeconfig = write_kubeconfig(
        work / run.name / "kubeconfig", server, ca, user=run.service_account, token=token
    )
    # Under a supervisor that restarts it when it exits, as the kubelet restarts a pod's container.
    argv = [
        sys.executable,
        "-m",
        "tests.realcluster.supervise",
        "--",
        *run.argv,
        f"--kubeconfig={kubeconfig}",
    ]
    env = {**run.env, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}
    return Running(run, spawn(run.name, argv, logs, env=env, cwd=work), kubeconfig)


def venv_bin() -> Path:
    return Path(sys.executable).parent


def runs(work: Path, node: str, host_paths: Mapping[str, Path]) -> list[HostRun]:
    out: list[HostRun] = []
    for manifest, name in WORKLOADS:
        out.extend(host_runs(manifest, name, work=work, node=node, host_paths=host_paths, bin_dir=venv_bin()))
    return out
