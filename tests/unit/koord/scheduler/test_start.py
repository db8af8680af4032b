"""koord-scheduler's start on the default profile imports nothing of the ``kubernetes`` package: it reads
the kubeconfig itself and sends lists, watches and bindings on the lean transport (a process of its own,
so no other test's imports count)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from koordlet.testing import wait_until
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401

CHILD = """
import atexit, sys
def report():
    loaded = sorted(m for m in sys.modules if m == "kubernetes" or m.startswith("kubernetes."))
    print("KUBERNETES-MODULES", len(loaded), loaded[:5], file=sys.stderr, flush=True)
atexit.register(report)
from koord.scheduler.cli import entry
entry(sys.argv[1:])
"""


def test_default_profile_binds_without_importing_kubernetes(
    api_server_factory: Callable[..., APIServer],  # noqa: F811
    tmp_path: Path,
) -> None:
    server = api_server_factory(tls=True)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(server.kubeconfig()))
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": "default-scheduler"}],
            }
        )
    )
    ready = {"type": "Ready", "status": "True"}
    allocatable = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    server.store.create(
        "nodes",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"allocatable": allocatable, "capacity": allocatable, "conditions": [ready]},
        },
    )
    server.store.create(
        "pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        },
    )
    argv = [f"--kubeconfig={kubeconfig}", "--addr=127.0.0.1:0", "--no-leader-elect", f"--config={config}"]
    log = tmp_path / "scheduler.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, *argv], stdout=out, stderr=subprocess.STDOUT)
    try:

        def bound() -> bool:
            got = server.store.get("pods", "p", namespace="default")
            return bool(got and got["spec"].get("nodeName"))

        assert wait_until(bound, 30), log.read_text()[-3000:]
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    time.sleep(0)
    text = log.read_text()
    assert "KUBERNETES-MODULES 0 []" in text, text[-3000:]
