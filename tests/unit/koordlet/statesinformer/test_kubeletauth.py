"""Which credentials go to the kubelet: an explicit token file first, the service-account token in a pod,
else the kubeconfig's user (its token file re-read per request, its token, its client certificate);
and the flags that set them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from koordlet import config
from koordlet.statesinformer.config import InformerConfig
from koordlet.statesinformer.informer import _api_client
from koordlet.statesinformer.kubeletauth import SERVICE_ACCOUNT_TOKEN, kubelet_credentials
from koordshared.kube.client import close_client
from koordshared.kube.kubeconfig import Endpoint
from koordshared.kube.transport import LeanClient
from koordshared.runtime.errors import ConfigError


class ClientConfiguration:
    """What the agent's API client holds (``kubernetes.client.Configuration``'s fields it reads)."""

    def __init__(self, header: str | None, cert: str | None = None, key: str | None = None) -> None:
        self.header, self.cert_file, self.key_file = header, cert, key

    def auth_settings(self) -> dict[str, Any]:
        return {"BearerToken": {"value": self.header}} if self.header else {}


def kubeconfig(tmp_path: Path, user: dict[str, Any]) -> str:
    path = tmp_path / "conf" / "kubeconfig"
    path.parent.mkdir()
    doc = {
        "current-context": "b",
        "contexts": [
            {"name": "a", "context": {"user": "other"}},
            {"name": "b", "context": {"user": "agent"}},
        ],
        "users": [{"name": "other", "user": {"tokenFile": "/nowhere"}}, {"name": "agent", "user": user}],
    }
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_explicit_token_file_wins(tmp_path: Path) -> None:
    token = tmp_path / "t"
    token.write_text("explicit\n")
    cfg = InformerConfig(
        node_name="n", kubeconfig=kubeconfig(tmp_path, {"token": "k"}), kubelet_token_file=str(token)
    )
    creds = kubelet_credentials(cfg, ClientConfiguration("Bearer k"))
    assert creds.header() == "Bearer explicit"


def test_in_a_pod_the_service_account_token() -> None:
    creds = kubelet_credentials(InformerConfig(node_name="n"), ClientConfiguration("bearer sa"))
    assert creds.token_file == SERVICE_ACCOUNT_TOKEN and creds.authorization is None


def test_kubeconfig_token_file_relative_and_reread(tmp_path: Path) -> None:
    cfg = InformerConfig(node_name="n", kubeconfig=kubeconfig(tmp_path, {"tokenFile": "tok"}))
    token = tmp_path / "conf" / "tok"
    token.write_text("one")
    # the client library read the file once; the kubelet gets the file as it is now
    creds = kubelet_credentials(cfg, ClientConfiguration("Bearer one"))
    token.write_text("two\n")
    assert creds.header() == "Bearer two"


def test_kubeconfig_token_and_client_certificate(tmp_path: Path) -> None:
    cfg = InformerConfig(node_name="n", kubeconfig=kubeconfig(tmp_path, {"token": "k"}))
    client = ClientConfiguration("Bearer k", cert="/c.pem", key="/k.pem")
    creds = kubelet_credentials(cfg, client)
    assert creds.header() == "Bearer k" and (creds.cert_file, creds.key_file) == ("/c.pem", "/k.pem")
    client.header = "Bearer refreshed"  # asked per request: an exec plugin's token the client renewed
    assert creds.header() == "Bearer refreshed"
    certs_only = kubelet_credentials(cfg, ClientConfiguration(None, cert="/c.pem", key="/k.pem"))
    assert certs_only.header() == "" and certs_only.cert_file == "/c.pem"


def test_a_broken_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="not a kubeconfig"):
        kubelet_credentials(InformerConfig(node_name="n", kubeconfig=str(bad)), ClientConfiguration(None))


def test_flags() -> None:
    values: dict[str, object] = {f.name: f.default for f in config.AGENT_FLAGS}
    values.update(
        {"kubelet-token-file": "/etc/koordlet/token", "kubelet-certificate-authority": "/etc/ca.crt"}
    )
    informer = config.build(values, environ={"NODE_NAME": "n"}).informer
    assert (informer.kubelet_token_file, informer.kubelet_ca_file) == ("/etc/koordlet/token", "/etc/ca.crt")
    default = config.build({f.name: f.default for f in config.AGENT_FLAGS}, environ={"NODE_NAME": "n"})
    assert (default.informer.kubelet_token_file, default.informer.kubelet_ca_file) == ("", "")


def test_a_lean_clients_endpoint_gives_its_token_token_file_and_certificate(tmp_path: Path) -> None:
    cfg = InformerConfig(node_name="n", kubeconfig=kubeconfig(tmp_path, {"token": "k"}))
    creds = kubelet_credentials(cfg, Endpoint(server="https://api", token="k", cert_file="/c", key_file="/k"))
    assert creds.header() == "Bearer k" and (creds.cert_file, creds.key_file) == ("/c", "/k")
    token = tmp_path / "tok"
    token.write_text("one\n")
    creds = kubelet_credentials(cfg, Endpoint(server="https://api", token_file=str(token)))
    token.write_text("two\n")  # re-read per request, as the official client's tokenFile is
    assert creds.header() == "Bearer two" and creds.cert_file == ""
    assert kubelet_credentials(cfg, Endpoint(server="https://api")).header() == ""


@pytest.mark.parametrize(
    ("user", "lean"),
    [
        ({"token": "k"}, True),
        ({"tokenFile": "tok"}, True),
        # inline certificate data: the kubelet's TLS loads files, which the official client writes
        ({"client-certificate-data": "Yw==", "client-key-data": "aw=="}, False),
    ],
)
def test_the_agent_takes_the_lean_client_where_the_kubelet_can_be_shown_its_credentials(
    tmp_path: Path, user: dict[str, Any], lean: bool
) -> None:
    path = Path(kubeconfig(tmp_path, user))
    doc = yaml.safe_load(path.read_text())
    doc["contexts"][1]["context"]["cluster"] = "c"
    doc["clusters"] = [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}]
    path.write_text(yaml.safe_dump(doc))
    (path.parent / "tok").write_text("t")
    client = _api_client(InformerConfig(node_name="n", kubeconfig=str(path)))
    try:
        assert isinstance(client, LeanClient) is lean
    finally:
        close_client(client)
