"""The real agent process in cluster mode against the test API server, as the DaemonSet runs it: its own
ServiceAccount token in a kubeconfig, the shipped RBAC applied, a Node object whose kubelet endpoint is
a fake kubelet on loopback."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from koordlet.testing.agent import Agent
from koordlet.testing.kubelet import FakeKubelet
from koordshared.testing import objects
from tests.apiserver import APIServer
from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy" / "daemonset"
NODE = "fault-node"
AGENT_SA = ("koordinator-system", "koordlet")


def manifests(*names: str) -> list[dict[str, Any]]:
    """The objects of the DaemonSet's manifest files ``names``."""
    return [d for n in names for d in yaml.safe_load_all((DEPLOY / n).read_text()) if d]


def write_kubeconfig(path: Path, server: APIServer, token: str) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": {"server": server.url}}],
        "users": [{"name": "test", "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        "current-context": "test",
    }
    path.write_text(json.dumps(doc))
    return path


def add_node(server: APIServer, kubelet: FakeKubelet, name: str = NODE) -> None:
    server.store.create("nodes", objects.node(name, "2", "8Gi", kubelet_port=kubelet.port))


@contextlib.contextmanager
def cluster_agent(
    tmp: Path,
    server: APIServer,
    *extra: str,
    files: Sequence[str] = ("koordlet.yaml", "rbac.yaml"),
    env: Mapping[str, str] | None = None,
) -> Iterator[tuple[Agent, FakeKubelet]]:
    """The agent as the DaemonSet's ServiceAccount, ready; stopped (exit 0 checked) on the way out;
    ``env`` is added to its environment."""
    server.apply(*manifests(*files))
    with FakeKubelet() as kubelet:
        add_node(server, kubelet)
        kubeconfig = write_kubeconfig(tmp / "kubeconfig.json", server, server.token_for(*AGENT_SA))
        agent = Agent(
            tmp,
            "--kubelet-insecure-tls",
            f"--kubelet-read-only-port={kubelet.port}",
            *extra,
            env={"NODE_NAME": NODE, **(env or {})},
            kubeconfig=kubeconfig,
        )
        try:
            agent.wait_ready()
            yield agent, kubelet
        finally:
            code = agent.stop()
        assert code == 0, agent.tail()
