"""Run koord-manager in-process against the test API server, and build the objects its tests need."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from koord.manager.app import Manager
from koord.manager.config import ManagerConfig
from koordlet import testing
from koordlet.testing.agent import http_get, wait_http
from koordshared.kube import process
from koordshared.kube.process import Address
from koordshared.testing.ports import EPHEMERAL
from tests.apiserver import APIServer
from tests.cluster.child import ChildProcess

NS = "koordinator-system"


CM = "slo-controller-config"


def node(
    name: str, labels: dict[str, str] | None = None, cpu: str = "16", memory: str = "32Gi"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "status": {
            "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
        },
    }


def configmap(**keys: Any) -> dict[str, Any]:
    data = {k.replace("_", "-"): v if isinstance(v, str) else json.dumps(v) for k, v in keys.items()}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CM, "namespace": NS}, "data": data}


def ensure_namespace(server: APIServer, name: str = NS) -> None:
    if get(server, "namespaces", name) is None:
        server.store.create(
            "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )


def set_config(server: APIServer, **keys: Any) -> None:
    """Create or replace the slo-controller-config ConfigMap's data."""
    ensure_namespace(server)
    cm = configmap(**keys)
    try:
        current = server.store.get("configmaps", CM, NS)
    except Exception:
        server.store.create("configmaps", cm)
        return
    current["data"] = cm["data"]
    server.store.update("configmaps", current)


def wait_until(cond: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> float:
    """Seconds until ``cond()`` held; fails the test after ``timeout``."""
    waited = testing.wait_until(cond, timeout)
    if not waited:
        raise AssertionError(f"{what} not reached in {timeout}s")
    return waited.seconds


def get(server: APIServer, resource: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    try:
        out: dict[str, Any] = server.store.get(resource, name, namespace)
    except Exception:
        return None
    return out


@dataclass
class Running:
    manager: Manager
    registry: CollectorRegistry
    stop: threading.Event
    thread: threading.Thread
    exit_code: list[int]

    def metric(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, labels)
        return value or 0.0


def manager_config(server: APIServer, **overrides: Any) -> ManagerConfig:
    cfg = ManagerConfig(
        addr=Address("127.0.0.1", 0),
        client_configuration=server.client_config(),
        leader_election=False,
        request_timeout=2.0,
        watch_timeout=30.0,
    )
    return replace(cfg, **overrides)


@contextmanager
def running_manager(
    server: APIServer, *, sync_timeout: float = 10, synced: bool = True, **overrides: Any
) -> Iterator[Running]:
    """koord-manager running until the block ends (then stopped, checked to exit 0, threads joined);
    entered once its caches are synced, or at once without ``synced``."""
    cfg = manager_config(server, **overrides)
    registry = CollectorRegistry()
    manager = Manager(cfg, registry)
    stop = threading.Event()
    code: list[int] = []

    def run() -> None:
        code.append(
            process.serve(
                "koord-manager", manager.components(), cfg.addr, registry, stop, sync_timeout=sync_timeout
            )
        )

    thread = threading.Thread(target=run, name="test-koord-manager")
    thread.start()
    running = Running(manager, registry, stop, thread, code)
    try:
        if synced:
            wait_until(manager.informers_synced, 10, "informers synced")
        yield running
    finally:
        stop.set()
        thread.join(10)
        manager.close()
    assert not thread.is_alive(), "koord-manager did not stop"
    assert code == [0], code


def write_kubeconfig(path: Path, server: APIServer) -> Path:
    """A kubeconfig for ``server`` (plain HTTP, no credentials: the test server allows everything)."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": {"server": server.url}}],
        "users": [{"name": "test", "user": {}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        "current-context": "test",
    }
    path.write_text(json.dumps(doc))
    return path


class ManagerProcess(ChildProcess):
    """A real ``koord-manager`` child process (``python -m koord.manager``); :meth:`stop` sends SIGTERM
    and returns the exit code, :meth:`kill` sends SIGKILL."""

    def __init__(self, tmp: Path, server: APIServer, identity: str, *extra: str) -> None:
        self.identity = identity
        kubeconfig = write_kubeconfig(tmp / "kubeconfig.json", server)
        argv = [
            f"--kubeconfig={kubeconfig}",
            f"--addr={EPHEMERAL}",
            f"--leader-election-identity={identity}",
            *extra,
        ]
        super().__init__(f"koord-manager {identity}", "koord.manager", argv, tmp / f"manager-{identity}.log")

    def metrics(self) -> str:
        status, body = http_get(self.base + "/metrics")
        assert status == 200
        return body.decode()

    def is_leader(self) -> bool:
        try:
            return "koord_manager_is_leader 1.0" in self.metrics()
        except OSError:
            return False

    def wait_ready(self, timeout: float = 30.0) -> None:
        if not wait_http(self.base + "/readyz", timeout):
            raise AssertionError(f"koord-manager {self.identity} not ready in {timeout}s:\n{self.tail()}")
