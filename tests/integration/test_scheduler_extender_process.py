"""The real ``koord-scheduler-extender`` process against the test API server: ready once its caches
synced, answers kube-scheduler's calls, stops on SIGTERM with status 0; a third-party scheduler plugin
built as a wheel is discovered through its entry point, enabled by the profile and seen in /filter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordlet.testing.agent import http_get, wait_http
from koordshared.testing import objects
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.cluster.extenderharness import ExtenderProcess as Extender
from tests.cluster.pluginsite import install_wheel
from tests.support.paths import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "scheduler_plugin_dist"
PROG = "koord.scheduler.extender"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Build the fixture distribution (wheel) and install it into its own site directory."""
    yield install_wheel(FIXTURE, tmp_path_factory.mktemp("scheduler-plugin"), "koordlet_avoid_label")


def go_pod(name: str) -> dict[str, Any]:
    p = objects.pod(name)
    return {"metadata": p["metadata"], "spec": p["spec"], "status": {}}


def seed(server: APIServer) -> None:
    now = time.time()
    server.store.create("nodes", objects.node("plain"))
    server.store.create("nodes", objects.node("tainted", labels={"example.com/no-batch": "true"}))
    server.store.create("nodes", objects.node("hot"))
    server.store.create("nodemetrics", objects.node_metric("hot", update_time=now, cpu_milli=15000))
    server.store.create("nodemetrics", objects.node_metric("plain", update_time=now, cpu_milli=1000))


def test_process_ready_answers_and_stops(api_server: APIServer, tmp_path: Path) -> None:  # noqa: F811
    seed(api_server)
    ext = Extender(tmp_path, api_server)
    try:
        assert wait_http(ext.base + "/readyz", 30), (tmp_path / "extender.log").read_text()
        status, res = ext.post("filter", {"Pod": go_pod("p"), "Nodes": None, "NodeNames": ["plain", "hot"]})
        assert status == 200
        assert res["NodeNames"] == ["plain"] and res["FailedNodes"] == {
            "hot": "node(s) cpu usage exceed threshold"
        }
        status, body = http_get(ext.base + "/metrics")
        text = body.decode()
        assert 'koord_scheduler_extender_cached_objects{resource="nodes"} 3.0' in text
        assert 'koord_scheduler_extender_cached_objects{resource="nodemetrics"} 2.0' in text
    finally:
        code = ext.stop()
    assert code == 0, (tmp_path / "extender.log").read_text()


def test_third_party_plugin_from_a_wheel(api_server: APIServer, tmp_path: Path, plugin_site: Path) -> None:  # noqa: F811
    listed = subprocess.run(
        [sys.executable, "-m", PROG, "--list-plugins"],
        env={**os.environ, "PYTHONPATH": str(plugin_site)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split()[1:] for line in listed.stdout.splitlines()[1:]}
    assert rows["AvoidLabel"] == ["entrypoint:koordlet-avoid-label", "-"]  # registered, not enabled

    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "plugins": {"multiPoint": {"enabled": [{"name": "AvoidLabel", "weight": 1}]}},
                "pluginConfig": [{"name": "AvoidLabel", "args": {"label": "example.com/no-batch"}}],
            }
        ],
    }
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        json.dumps(
            {
                **config,
                "profiles": [{**config["profiles"][0], "pluginConfig": [{"name": "AvoidLabel", "args": {}}]}],
            }
        )
    )
    refused = subprocess.run(
        [sys.executable, "-m", PROG, f"--config={bad}", "--list-plugins"],
        env={**os.environ, "PYTHONPATH": str(plugin_site)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2 and "plugin 'AvoidLabel': invalid args: label: required" in refused.stderr

    seed(api_server)
    ext = Extender(tmp_path, api_server, f"--config={path}", site=plugin_site)
    try:
        assert wait_http(ext.base + "/readyz", 30), (tmp_path / "extender.log").read_text()
        status, res = ext.post("filter", {"Pod": go_pod("p"), "NodeNames": ["plain", "tainted", "hot"]})
        assert status == 200
        assert res["NodeNames"] == ["plain"]
        assert res["FailedNodes"] == {
            "hot": "node(s) cpu usage exceed threshold",  # LoadAware still runs (the default multiPoint)
            "tainted": "node(s) had label example.com/no-batch",
        }
    finally:
        code = ext.stop()
    assert code == 0
