"""The cluster's certificates, made with openssl: one CA for every serving and client certificate (as a
kubeadm cluster without its front proxy), client certificates named as kube-apiserver's RBAC bootstrap
policy expects (``system:masters``, ``system:kube-controller-manager``, ``system:node:<name>``), and the
service-account signing key. ECDSA P-256 keys: a whole set is made in about a second.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

DAYS = "30"


@dataclass(frozen=True)
class Cert:
    name: str
    cn: str
    orgs: tuple[str, ...] = ()
    sans: tuple[str, ...] = ()
    """``IP:...``/``DNS:...`` entries; a serving certificate has some, a client certificate none."""


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {done.stderr.strip()}")


def _key(path: str, cwd: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path, cwd=cwd)


def make_ca(d: Path) -> None:
    _key("ca.key", d)
    _openssl(
        "req", "-x509", "-new", "-key", "ca.key", "-out", "ca.crt", "-days", DAYS,
        "-subj", "/CN=koordlet-real-cluster-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        cwd=d,
    )  # fmt: skip


def issue(d: Path, cert: Cert) -> tuple[Path, Path]:
    """``<name>.crt``/``<name>.key`` signed by the CA in ``d``."""
    _key(f"{cert.name}.key", d)
    subject = "".join(f"/O={o}" for o in cert.orgs) + f"/CN={cert.cn}"
    _openssl("req", "-new", "-key", f"{cert.name}.key", "-out", f"{cert.name}.csr", "-subj", subject, cwd=d)
    usage = "serverAuth,clientAuth" if cert.sans else "clientAuth"
    ext = [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        f"extendedKeyUsage={usage}",
    ]
    if cert.sans:
        ext.append("subjectAltName=" + ",".join(cert.sans))
    (d / f"{cert.name}.ext").write_text("\n".join(ext) + "\n")
    _openssl(
        "x509", "-req", "-in", f"{cert.name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", f"{cert.name}.crt", "-days", DAYS, "-extfile", f"{cert.name}.ext",
        cwd=d,
    )  # fmt: skip
    (d / f"{cert.name}.csr").unlink()
    (d / f"{cert.name}.ext").unlink()
    return d / f"{cert.name}.crt", d / f"{cert.name}.key"


def service_account_keys(d: Path) -> tuple[Path, Path]:
    """The key kube-apiserver signs service-account tokens with, and its public half to verify them."""
    _key("sa.key", d)
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)
    return d / "sa.key", d / "sa.pub"


def make_all(d: Path, *, node: str, node_ip: str, service_ip: str) -> None:
    d.mkdir(parents=True, exist_ok=True)
    make_ca(d)
    service_account_keys(d)
    names = (
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    )
    for cert in (
        Cert(
            "apiserver",
            "kube-apiserver",
            sans=(
                "IP:127.0.0.1",
                f"IP:{node_ip}",
                f"IP:{service_ip}",
                "DNS:localhost",
                *(f"DNS:{n}" for n in names),
            ),
        ),
        Cert("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)),
        Cert("admin", "kubernetes-admin", ("system:masters",)),
        Cert("controller-manager", "system:kube-controller-manager"),
        Cert("scheduler", "system:kube-scheduler"),
        Cert("kubelet-client", f"system:node:{node}", ("system:nodes",)),
        Cert("kubelet", node, sans=(f"IP:{node_ip}", "IP:127.0.0.1", f"DNS:{node}")),
    ):
        issue(d, cert)
