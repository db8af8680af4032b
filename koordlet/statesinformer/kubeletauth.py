"""The credentials the agent shows the kubelet. koordlet sends its API credentials (the transport of its
rest config: the kubeconfig's user, or the pod's service account); so does this agent, in this order:

1. ``--kubelet-token-file``: that file's token, re-read on every request;
2. in a pod (no ``--kubeconfig``, no client configuration given): the service-account token, re-read on
   every request;
3. with ``--kubeconfig``: its user's ``tokenFile`` re-read on every request (the client library reads it
   once), else the API client's bearer token (a ``token``, or an exec plugin's, which the client
   refreshes), and the client certificate and key the API client presents: those of the lean client's
   :class:`~koordshared.kube.kubeconfig.Endpoint`, or of the official client's ``Configuration``.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from koordlet.statesinformer.config import SERVICE_ACCOUNT_DIR, InformerConfig
from koordlet.statesinformer.kubelet import KubeletCredentials
from koordshared.kube.kubeconfig import Endpoint
from koordshared.runtime.errors import ConfigError

SERVICE_ACCOUNT_TOKEN = f"{SERVICE_ACCOUNT_DIR}/token"


def kubeconfig_token_file(kubeconfig: str) -> str:
    """The current context's user's ``tokenFile`` (relative paths from the kubeconfig's directory), or
    empty; :class:`ConfigError` when the file is not a kubeconfig."""
    try:
        doc = yaml.safe_load(Path(kubeconfig).read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"--kubeconfig {kubeconfig}: {err}") from err
    if not isinstance(doc, dict):
        raise ConfigError(f"--kubeconfig {kubeconfig}: not a kubeconfig")

    def named(section: str, name: Any) -> dict[str, Any]:
        for entry in doc.get(section) or ():
            if isinstance(entry, dict) and entry.get("name") == name:
                return entry
        return {}

    context = named("contexts", doc.get("current-context")).get("context") or {}
    user = named("users", context.get("user") if isinstance(context, dict) else None).get("user") or {}
    token_file = user.get("tokenFile") if isinstance(user, dict) else None
    if not isinstance(token_file, str) or not token_file:
        return ""
    path = Path(token_file)
    return str(path if path.is_absolute() else Path(kubeconfig).resolve().parent / path)


def lean_usable(ep: Endpoint) -> bool:
    """Whether the kubelet can be shown ``ep``'s credentials: its TLS context loads a client certificate
    from files only, and the official client writes inline certificate data to some."""
    return not (ep.cert_data or ep.key_data)


def kubelet_credentials(config: InformerConfig, client_credentials: Any) -> KubeletCredentials:
    """The credentials for the kubelet, given the agent's informer config and what its API client
    connects with: a lean client's :class:`Endpoint` or an official ``kubernetes.client.Configuration``."""
    if config.kubelet_token_file:
        return KubeletCredentials(token_file=config.kubelet_token_file)
    if not config.kubeconfig and config.client_configuration is None:
        return KubeletCredentials(token_file=SERVICE_ACCOUNT_TOKEN)
    if isinstance(client_credentials, Endpoint):
        return _endpoint_credentials(client_credentials)
    token_file = kubeconfig_token_file(config.kubeconfig) if config.kubeconfig else ""

    def authorization() -> str | None:
        value = client_credentials.auth_settings().get("BearerToken", {}).get("value")
        return str(value) if value else None

    return KubeletCredentials(
        token_file=token_file,
        authorization=authorization,
        cert_file=str(getattr(client_credentials, "cert_file", None) or ""),
        key_file=str(getattr(client_credentials, "key_file", None) or ""),
    )


def _endpoint_credentials(ep: Endpoint) -> KubeletCredentials:
    """Its token, token file (re-read per request), certificate and key files; inline certificate data
    is not carried (see :func:`lean_usable`)."""
    token = f"Bearer {ep.token}" if ep.token else None
    return KubeletCredentials(
        token_file=ep.token_file,
        authorization=(lambda: token) if token else None,
        cert_file=ep.cert_file,
        key_file=ep.key_file,
    )
