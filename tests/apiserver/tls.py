"""TLS for the test API server (``APIServer(tls=True)``, ``python -m tests.apiserver --tls``).

kubectl sends no bearer token to a plain ``http://`` server, so with RBAC on it would always be
``system:anonymous``; over HTTPS it authenticates as a real client does. :class:`ServingCerts` makes a
throw-away CA and a serving certificate for 127.0.0.1 with openssl (``tests.support.pki``), gives the
server its ``SSLContext`` and clients the CA (as a file for the official client, as data for a
kubeconfig's ``certificate-authority-data``), and deletes them all when the server stops. Handshakes run in
each connection's own thread, bounded by :data:`HANDSHAKE_TIMEOUT`, so a client that never speaks TLS
holds up nobody.
"""

from __future__ import annotations

import base64
import shutil
import ssl
import tempfile
from pathlib import Path

from tests.support.pki import make_pki

HANDSHAKE_TIMEOUT = 3.0


class ServingCerts:
    """A CA and a serving certificate for 127.0.0.1 in a temporary directory."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="test-apiserver-tls-"))
        try:
            make_pki(self.dir)
        except BaseException:
            self.remove()
            raise
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(self.dir / "server.crt", self.dir / "server.key")

    @property
    def ca_file(self) -> Path:
        return self.dir / "ca.crt"

    def ca_data(self) -> str:
        """The CA certificate, base64 (a kubeconfig's ``certificate-authority-data``)."""
        return base64.b64encode(self.ca_file.read_bytes()).decode()

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
