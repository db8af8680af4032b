"""The real ``koord-descheduler`` process against the test API server: ready once its caches synced (and
no round before, however long the sync takes), evicts through the Eviction API, exposes its metrics, stops
on SIGTERM with status 0; two replicas elect one leader and hand over on a graceful stop; start-up errors
exit 2 naming the problem; a third-party Deschedule plugin built as a wheel is listed and runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordlet.testing.agent import wait_http
from koordshared.testing import objects
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.cluster.deschedulerharness import DeschedulerProcess, low_node_load
from tests.cluster.pluginsite import install_wheel
from tests.managerharness import wait_until, write_kubeconfig
from tests.support.paths import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "descheduler_plugin_dist"
LOWNODELOAD = low_node_load("test")


@pytest.fixture
def server(api_server_factory: Any) -> APIServer:  # noqa: F811
    return api_server_factory(kubelet_auto_confirm=True)


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield install_wheel(FIXTURE, tmp_path_factory.mktemp("descheduler-plugin"), "koordlet_evict_labelled")


def seed(server: APIServer, *, labelled: int = 0) -> None:
    """hot at 90 % cpu (nine 1000m pods of one ReplicaSet), cold at 10 %."""
    now = time.time()
    server.store.create("nodes", objects.node("hot", cpu="10"))
    server.store.create("nodes", objects.node("cold", cpu="10"))
    reported = []
    for i in range(9):
        labels = {"koordinator.sh/priority-class": "koord-batch"}
        if i < labelled:
            labels["example.com/evict"] = "true"
        p = objects.pod(f"be-{i}", node_name="hot", phase="Running", labels=labels)
        p["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs", "controller": True}
        ]
        p["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        server.store.create("pods", p)
        reported.append(("default", f"be-{i}", 1000, 0, ""))
    server.store.create("nodemetrics", objects.node_metric("hot", update_time=now, pods=reported))
    server.store.create("nodemetrics", objects.node_metric("cold", update_time=now, system=(1000, 0)))


def evictions(server: APIServer, status: int = 201) -> list[str]:
    return [
        r.path.split("/")[-2] for r in server.requests if r.path.endswith("/eviction") and r.status == status
    ]


def metric(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        named = line.startswith(name + "{") or line.startswith(name + " ")
        if named and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_process_ready_evicts_exposes_metrics_and_stops(server: APIServer, tmp_path: Path) -> None:
    seed(server)
    d = DeschedulerProcess(
        tmp_path, write_kubeconfig(tmp_path / "kubeconfig", server), LOWNODELOAD, "--no-leader-elect"
    )
    try:
        assert wait_http(d.base + "/readyz", 20), d.log()
        wait_until(lambda: len(evictions(server)) >= 1, 15, "an eviction")

        # The API server shows the eviction before the descheduler has counted it and finished its round:
        # wait on the counters and the log line themselves.
        def counted() -> bool:
            text = d.metrics()
            labels = {"result": "success", "strategy": "LowNodeLoad", "node": "hot"}
            evicted = metric(text, "descheduler_pods_evicted", **labels)
            return evicted >= 1 and metric(text, "koord_descheduler_rounds_total", result="ok") >= 2

        assert wait_until(counted, 15), d.metrics()
        assert "koord_descheduler_round_duration_seconds_count" in d.metrics()
        # the second round over the threshold is the first to evict: consecutiveAbnormalities 2 (> 2 needs 3)
        logged = r"evicted default/be-\d from hot \(LowNodeLoad\): node is overutilized"
        assert wait_until(lambda: re.search(logged, d.log()) is not None, 15), d.log()
        assert "over its node thresholds 1 time(s) in a row" in d.log()
    finally:
        started = time.monotonic()
        code = d.stop()
    assert code == 0, d.log()
    assert time.monotonic() - started < 6
    assert "stopped" in d.log()


def test_no_round_runs_before_the_pod_cache_is_synced(server: APIServer, tmp_path: Path) -> None:
    """Past ``--sync-timeout`` the process keeps waiting for its caches: a round over a partial pod cache
    would count a workload's migrating pods short and evict past its limits."""
    seed(server)
    server.fail_next(4, 403, method="GET", path_contains="/api/v1/pods")  # the list refused 4 times
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server)
    d = DeschedulerProcess(tmp_path, kubeconfig, LOWNODELOAD, "--no-leader-elect", "--sync-timeout=0.2s")
    try:
        assert wait_until(lambda: "informers has not synced after" in d.log(), 20), d.log()
        assert "still waiting" in d.log() and "going on" not in d.log()
        assert d.get("/readyz")[0] == 503 and "round 1" not in d.log() and not evictions(server)
        assert wait_http(d.base + "/readyz", 20), d.log()
        wait_until(lambda: len(evictions(server)) >= 1, 15, "an eviction once synced")
    finally:
        code = d.stop()
    assert code == 0, d.log()


def test_two_replicas_elect_one_leader_and_hand_over(server: APIServer, tmp_path: Path) -> None:
    seed(server)
    server.store.create("namespaces", {"metadata": {"name": "koordinator-system"}}, keep_status=False)
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server)
    election = [
        "--leader-elect",
        "--leader-elect-lease-duration=3s",
        "--leader-elect-renew-deadline=2s",
        "--leader-elect-retry-period=0.5s",
        "--request-timeout=0.5s",
    ]
    a = DeschedulerProcess(
        tmp_path, kubeconfig, LOWNODELOAD, *election, "--leader-elect-identity=a", name="a"
    )
    b = DeschedulerProcess(
        tmp_path, kubeconfig, LOWNODELOAD, *election, "--leader-elect-identity=b", name="b"
    )
    try:
        for d in (a, b):
            assert wait_http(d.base + "/readyz", 20), d.log()

        def holder() -> str:
            try:
                lease = server.store.get(
                    "leases.coordination.k8s.io", "koord-descheduler", "koordinator-system"
                )
            except Exception:
                return ""
            return str(lease["spec"].get("holderIdentity") or "")

        wait_until(lambda: holder() in ("a", "b"), 10, "a leader")
        leader, standby = (a, b) if holder() == "a" else (b, a)
        wait_until(
            lambda: metric(standby.metrics(), "koord_descheduler_rounds_total", result="not-leader") >= 2,
            10,
            "standby rounds",
        )
        assert metric(leader.metrics(), "koord_descheduler_is_leader") == 1
        assert metric(standby.metrics(), "koord_descheduler_is_leader") == 0
        assert metric(standby.metrics(), "koord_descheduler_rounds_total", result="ok") == 0
        assert leader.stop() == 0
        wait_until(
            lambda: metric(standby.metrics(), "koord_descheduler_is_leader") == 1,
            10,
            "the standby takes over",
        )
        assert holder() == ("b" if leader is a else "a")
    finally:
        codes = [d.stop() for d in (a, b)]
    assert codes == [0, 0]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "koord.descheduler", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        (
            {"plugins": {"balance": {"enabled": [{"name": "LowNodLoad"}]}}},
            "plugin 'LowNodLoad': profile 'p': not registered",
        ),
        (
            {
                "plugins": {"balance": {"enabled": [{"name": "LowNodeLoad"}]}},
                "pluginConfig": [
                    {
                        "name": "LowNodeLoad",
                        "args": {"lowThresholds": {"cpu": 80}, "highThresholds": {"cpu": 50}},
                    }
                ],
            },
            "lowThresholds.cpu: 80 is above highThresholds.cpu (50)",
        ),
        (
            {
                "plugins": {"balance": {"enabled": [{"name": "LowNodeLoad"}]}},
                "pluginConfig": [
                    {
                        "name": "LowNodeLoad",
                        "args": {"evictableNamespaces": {"include": ["a"], "exclude": ["b"]}},
                    }
                ],
            },
            "evictableNamespaces: only one of include and exclude may be set",
        ),
    ],
)
def test_start_up_errors_exit_2_naming_the_problem(
    tmp_path: Path, profile: dict[str, Any], message: str
) -> None:
    import json

    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "apiVersion": "descheduler/v1alpha2",
                "kind": "DeschedulerConfiguration",
                "profiles": [{"name": "p", **profile}],
            }
        )
    )
    # no API server anywhere: the configuration is refused before anything connects
    out = run_cli(f"--config={cfg}", "--kubeconfig=/nonexistent")
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "profile 'p'" in out.stderr


def test_third_party_plugin_from_a_wheel_is_listed_and_runs(
    server: APIServer, tmp_path: Path, plugin_site: Path
) -> None:
    import json

    seed(server, labelled=1)
    config = {
        "deschedulingInterval": "1s",
        "profiles": [
            {
                "name": "drain",
                "plugins": {"deschedule": {"enabled": [{"name": "EvictLabelled"}]}},
                "pluginConfig": [
                    {"name": "EvictLabelled", "args": {"label": "example.com/evict"}},
                    {"name": "MigrationController", "args": {"skipCheckExpectedReplicas": True}},
                ],
            }
        ],
    }
    cfg = tmp_path / "drain.json"
    cfg.write_text(json.dumps(config))
    listed = run_cli(f"--config={cfg}", "--list-plugins", env={"PYTHONPATH": str(plugin_site)})
    assert listed.returncode == 0, listed.stderr
    # the fixture declares its plugin under the group's old name: still loaded, with a deprecation line
    assert "in the deprecated group koordlet.descheduler_plugins" in listed.stderr
    assert re.search(
        r"EvictLabelled\s+entrypoint:koordlet-evict-labelled\s+drain:deschedule", listed.stdout
    ), listed.stdout
    bad = run_cli(f"--config={cfg}", "--list-plugins")  # without the wheel on the path
    assert bad.returncode == 2 and "plugin 'EvictLabelled'" in bad.stderr
    assert "pluginConfig for an unknown plugin" in bad.stderr
    d = DeschedulerProcess(
        tmp_path,
        write_kubeconfig(tmp_path / "kubeconfig", server),
        config,
        "--no-leader-elect",
        env={"PYTHONPATH": str(plugin_site)},
    )
    try:
        wait_until(lambda: evictions(server) == ["be-0"], 20, "the labelled pod evicted")
        time.sleep(1.5)  # another round or so: nothing else is labelled
        assert evictions(server) == ["be-0"]
    finally:
        assert d.stop() == 0, d.log()
