"""``koord-manager top nodes`` against the test API server: each node's reported usage and NodeMetric age,
and the extender's verdict computed in-process with the extender's own plugins, which is the verdict a
running koord-scheduler-extender gives for the same cluster (asked at its ``/debug/nodes``)."""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from koord.manager.cli import entry
from koord.manager.top import top
from koordshared.testing import objects
from tests.apiserver import APIServer
from tests.apiserver.__main__ import kubeconfig
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.cluster.extenderharness import running_extender

BUSY = "node(s) cpu usage exceed threshold"


def cluster(server: APIServer, tmp: Path) -> Path:
    now = time.time()
    # 16-core nodes: hot at 75 % (over LoadAware's default 65 %), cold at 10 %, one stale (10 min), one
    # that never reported
    for name, cpu_milli, age in (("hot", 12000, 5), ("cold", 1600, 5), ("stale", 1600, 600)):
        server.store.create("nodes", objects.node(name))
        server.store.create(
            "nodemetrics",
            objects.node_metric(name, update_time=now - age, cpu_milli=cpu_milli, memory_bytes=8 * 2**30),
        )
    server.store.create("nodes", objects.node("silent"))
    server.store.create("pods", objects.pod("web", node_name="cold", requests={"cpu": "2"}, phase="Running"))
    path = tmp / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig(server)))
    return path


def run(*args: str) -> Any:
    return CliRunner().invoke(top, list(args))


def test_top_nodes_shows_usage_age_and_the_extenders_verdict(
    api_server: APIServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    kc = cluster(api_server, tmp_path)
    out = run("nodes", f"--kubeconfig={kc}")
    assert out.exit_code == 0, out.output
    lines = {line.split()[0]: line for line in out.output.splitlines()[1:]}
    assert set(lines) == {"cold", "hot", "silent", "stale"}
    assert out.output.splitlines()[0].split()[:2] == ["NODE", "READY"]
    assert "12.00/16.00 (75%)" in lines["hot"] and f"filtered: {BUSY} (LoadAwareScheduling)" in lines["hot"]
    assert "1.60/16.00 (10%)" in lines["cold"] and "score " in lines["cold"]
    assert "filtered:" in lines["stale"]  # older than LoadAware's 180 s expiry
    assert "no NodeMetric" in lines["silent"]

    doc = json.loads(run("nodes", f"--kubeconfig={kc}", "-o", "json").output)["nodes"]
    by = {r["node"]: r for r in doc}
    assert by["cold"]["cpuUsedMilli"] == 1600 and by["cold"]["cpuAllocatableMilli"] == 16000
    assert 5 <= by["cold"]["metricAgeSeconds"] < 30 and 600 <= by["stale"]["metricAgeSeconds"] < 630
    # the table was printed a moment before the JSON: its age is the same reading, up to that moment later
    shown = re.search(r"\s(\d+)s\s", lines["stale"])
    assert shown is not None, lines["stale"]
    assert 0 <= by["stale"]["metricAgeSeconds"] - int(shown.group(1)) < 2
    assert by["silent"]["nodeMetric"] is False and by["silent"]["metricAgeSeconds"] is None
    # the cold node carries web's 2-core request: the score counts it (a node without it scores higher)
    assert by["cold"]["explain"]["scores"]["LoadAwareScheduling"] < 100

    # a running extender over the same cluster says the same of every node
    with running_extender(api_server.client_config()) as app:
        asked = json.loads(
            run(
                "nodes", f"--kubeconfig={kc}", "-o", "json", f"--extender=http://127.0.0.1:{app.server.port}"
            ).output
        )["nodes"]
    assert [r["extender"] for r in asked] == [r["extender"] for r in doc]

    # a profile with a lower threshold filters the cold node too; a pod can be named
    profile = tmp_path / "profile.yaml"
    profile.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {
                        "pluginConfig": [
                            {"name": "LoadAwareScheduling", "args": {"usageThresholds": {"cpu": 5}}}
                        ]
                    }
                ],
            }
        )
    )
    strict = run("nodes", f"--kubeconfig={kc}", f"--config={profile}", "--pod=default/web")
    assert strict.exit_code == 0, strict.output
    cold = next(line for line in strict.output.splitlines() if line.startswith("cold"))
    assert f"filtered: {BUSY}" in cold


def test_errors_are_named(tmp_path: Path) -> None:
    held = socket.socket()  # bound, never listening: refused, and no one else can take the port
    held.bind(("127.0.0.1", 0))
    port = held.getsockname()[1]
    dead = tmp_path / "kubeconfig"
    dead.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "x"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    try:
        out = run("nodes", f"--kubeconfig={dead}")
    finally:
        held.close()
    assert out.exit_code == 1 and "nodes:" in out.output and "127.0.0.1" in out.output
    assert run("nodes", "--pod=web").exit_code == 2
    assert run("nodes", "--config=x.yaml", "--extender=http://x").exit_code == 2


def test_entry_dispatches_top(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        entry(["top", "nodes", "--help"])
    assert exit_info.value.code == 0
    assert "Usage: koord-manager top nodes" in capsys.readouterr().out
