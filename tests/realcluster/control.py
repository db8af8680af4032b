"""The control plane: etcd, kube-apiserver (TLS, RBAC and Node authorization, service-account tokens)
and kube-controller-manager, each a process on loopback with the flags a kubeadm cluster would give it,
less what needs a network (no cloud provider, no node IPAM, no endpoint reconciler).
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.realcluster.binaries import Binaries
from tests.realcluster.procs import Started, spawn, wait_until


@dataclass(frozen=True)
class Network:
    """Where kube-apiserver listens and what its Service range is."""

    api_host: str
    service_cidr: str
    service_ip: str
    """The first address of the range: the ``kubernetes`` Service's, in the serving certificate."""


LOOPBACK = Network("127.0.0.1", "10.96.0.0/24", "10.96.0.1")
"""A control plane without a node: nothing but this host reaches it."""


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kubelet: int
    kubelet_healthz: int

    def to_json(self) -> dict[str, int]:
        return dict(self.__dict__)


def write_kubeconfig(
    path: Path,
    server: str,
    ca: Path,
    *,
    user: str,
    cert: Path | None = None,
    key: Path | None = None,
    token: str = "",
) -> Path:
    creds: dict[str, str] = (
        {"token": token} if token else {"client-certificate": str(cert), "client-key": str(key)}
    )
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "real", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": creds}],
        "contexts": [{"name": user, "context": {"cluster": "real", "user": user}}],
        "current-context": user,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path


def https_get(url: str, ca: Path, cert: Path, key: Path, timeout: float = 2.0) -> tuple[int, bytes]:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.load_cert_chain(str(cert), str(key))
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=ctx) as r:
            return int(r.status), r.read()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read()


def start_etcd(bins: Binaries, data: Path, logs: Path, ports: Ports) -> Started:
    client = f"http://127.0.0.1:{ports.etcd_client}"
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    proc = spawn(
        "etcd",
        [
            str(bins.path("etcd")),
            "--name=real",
            f"--data-dir={data}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=real={peer}",
            "--listen-metrics-urls=",
            # A test cluster's data is thrown away: no fsync keeps etcd's latency off a busy disk's.
            "--unsafe-no-fsync",
            "--log-level=warn",
        ],
        logs,
    )

    def healthy() -> bool:
        with urllib.request.urlopen(f"{client}/health", timeout=1) as r:
            return bool(json.loads(r.read()).get("health") == "true")

    wait_until("etcd healthy", healthy, 60, watch=[proc])
    return proc


# Requests that change where pods are or whether they exist, logged by kube-apiserver itself: the tier
# counts bindings and evictions there (a scheduler binding a pod twice, an eviction that went around the
# Eviction API) instead of trusting what our processes say they did.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Metadata",
            "verbs": ["create", "delete", "deletecollection", "update", "patch"],
            "resources": [{"group": "", "resources": ["pods", "pods/binding", "pods/eviction", "bindings"]}],
        },
        {"level": "None"},
    ],
}


def audit_log(state: Path) -> Path:
    return state / "audit.log"


def audit_events(state: Path) -> list[dict[str, Any]]:
    """Every audit event kube-apiserver wrote so far (ResponseComplete stage)."""
    try:
        lines = audit_log(state).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def apiserver_argv(
    bins: Binaries,
    pki: Path,
    state: Path,
    ports: Ports,
    *,
    node_ip: str,
    net: Network,
    audit_policy: dict[str, Any] | None = None,
) -> list[str]:
    policy = state / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump(audit_policy or AUDIT_POLICY))
    return [
        str(bins.path("kube-apiserver")),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
        f"--bind-address={net.api_host}",
        f"--advertise-address={node_ip}",
        f"--secure-port={ports.apiserver}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        f"--kubelet-certificate-authority={pki / 'ca.crt'}",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        f"--service-cluster-ip-range={net.service_cidr}",
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        "--profiling=false",
        f"--audit-policy-file={policy}",
        f"--audit-log-path={audit_log(state)}",
        "--audit-log-format=json",
        "--audit-log-mode=blocking",
        "--v=1",
    ]


def start_apiserver(
    bins: Binaries,
    pki: Path,
    state: Path,
    logs: Path,
    ports: Ports,
    *,
    node_ip: str,
    net: Network,
    audit_policy: dict[str, Any] | None = None,
) -> Started:
    argv = apiserver_argv(bins, pki, state, ports, node_ip=node_ip, net=net, audit_policy=audit_policy)
    proc = spawn("kube-apiserver", argv, logs)
    base = f"https://{net.api_host}:{ports.apiserver}"
    wait_until(
        "kube-apiserver ready",
        lambda: https_get(f"{base}/readyz", pki / "ca.crt", pki / "admin.crt", pki / "admin.key")[0] == 200,
        120,
        watch=[proc],
    )
    return proc


def start_controller_manager(
    bins: Binaries,
    pki: Path,
    kubeconfig: Path,
    logs: Path,
    ports: Ports,
    net: Network,
    *,
    extra: tuple[str, ...] = (),
) -> Started:
    proc = spawn(
        "kube-controller-manager",
        [
            str(bins.path("kube-controller-manager")),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.controller_manager}",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            f"--cluster-signing-cert-file={pki / 'ca.crt'}",
            f"--cluster-signing-key-file={pki / 'ca.key'}",
            "--use-service-account-credentials=true",
            f"--service-cluster-ip-range={net.service_cidr}",
            "--leader-elect=false",
            "--profiling=false",
            "--v=1",
            *extra,
        ],
        logs,
    )
    return proc


def start_scheduler(bins: Binaries, kubeconfig: Path, work: Path, logs: Path, ports: Ports) -> Started:
    """kube-scheduler, the cluster's default scheduler (a Koordinator cluster keeps it beside
    koord-scheduler). It ignores ``--kubeconfig`` when given ``--config``: the kubeconfig goes in the
    configuration."""
    config = work / "kube-scheduler.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": str(kubeconfig)},
                "leaderElection": {"leaderElect": False},
            }
        )
    )
    return spawn(
        "kube-scheduler",
        [
            str(bins.path("kube-scheduler")),
            f"--config={config}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.scheduler}",
            "--profiling=false",
            "--v=1",
        ],
        logs,
    )
