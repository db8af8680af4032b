"""A throw-away PKI made with openssl: a CA, a server certificate for 127.0.0.1 and a client certificate
(tests of TLS serving; the caller marks them ``tool("openssl")``)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(d: Path) -> Path:
    """``ca.crt``/``ca.key``, ``server.crt``/``server.key`` for IP 127.0.0.1 and ``client.crt``/``client.key``
    (CN kube-scheduler), all signed by the CA, in ``d``; returns ``d``."""
    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
        cwd=d,
    )
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    for name, cn in (("server", "127.0.0.1"), ("client", "kube-scheduler")):
        openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN={cn}",
            cwd=d,
        )
        ext = ["-extfile", "san.cnf"] if name == "server" else []
        openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.crt",
            "-days",
            "1",
            *ext,
            cwd=d,
        )
    return d
