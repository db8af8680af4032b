"""koord-descheduler in-process against an API server: its real informers, evictor and frameworks, with
rounds run by the caller (``app.run_round()``) instead of on a timer. Independent of pytest."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from koord.descheduler.app import Descheduler
from koord.descheduler.config import DeschedulerConfig, parse_configuration
from koordshared.kube.client import make_api_client
from koordshared.kube.leaderelection import ElectionConfig
from koordshared.kube.process import Address
from koordshared.runtime.lifecycle import Supervisor
from koordshared.testing.ports import EPHEMERAL
from tests.cluster.child import ChildProcess


def low_node_load(profile: str, consecutive_abnormalities: int = 2) -> dict[str, Any]:
    """A DeschedulerConfiguration (1 s rounds) whose one profile balances with LowNodeLoad (cpu 45/75 %,
    memory out of play) through the MigrationController, which skips the expected-replicas check."""
    args = {
        "lowThresholds": {"cpu": 45, "memory": 100},
        "highThresholds": {"cpu": 75, "memory": 100},
        "anomalyCondition": {"consecutiveAbnormalities": consecutive_abnormalities},
    }
    return {
        "deschedulingInterval": "1s",
        "profiles": [
            {
                "name": profile,
                "plugins": {"balance": {"enabled": [{"name": "LowNodeLoad"}]}},
                "pluginConfig": [
                    {"name": "LowNodeLoad", "args": args},
                    {"name": "MigrationController", "args": {"skipCheckExpectedReplicas": True}},
                ],
            }
        ],
    }


@contextmanager
def running_descheduler(
    client_configuration: Any,
    config: Mapping[str, Any] | None = None,
    *,
    election: ElectionConfig | None = None,
    **kw: Any,
) -> Iterator[Descheduler]:
    """``config`` is a DeschedulerConfiguration; the caches are synced on entry and, with ``election``,
    this replica leads (released on exit)."""
    elected: dict[str, Any] = {"election": election, "request_timeout": 0.5} if election is not None else {}
    cfg = DeschedulerConfig(
        addr=Address("127.0.0.1", 0),
        configuration=parse_configuration(config or {}),
        leader_election=election is not None,
        **elected,
    )
    app = Descheduler(
        cfg,
        CollectorRegistry(),
        api_client=make_api_client(
            client_configuration=client_configuration, user_agent="koord-descheduler/test"
        ),
        **kw,
    )
    stop = threading.Event()
    supervisor = Supervisor(stop)
    app.env.stop = stop
    supervisor.go("events", lambda: app.events.run(stop))
    app.informers.start(stop, supervisor)
    if app.elector is not None:
        elector = app.elector
        supervisor.go("leader-election", lambda: elector.run(stop))
    try:
        deadline = time.monotonic() + 15
        while not app.informers.has_synced() or not app.is_leader():
            if time.monotonic() > deadline:
                raise AssertionError("koord-descheduler's caches did not sync (or it did not lead)")
            time.sleep(0.01)
        yield app
    finally:
        stop.set()
        app.informers.close()
        alive = supervisor.join(time.monotonic() + 10)
        app.close()
        assert not alive, f"threads still running: {alive}"


class DeschedulerProcess(ChildProcess):
    """A real ``koord-descheduler`` child process (``python -m koord.descheduler``) with its config
    written to ``tmp``; :meth:`stop` sends SIGTERM and returns the exit code."""

    def __init__(
        self,
        tmp: Path,
        kubeconfig: Path,
        config: Mapping[str, Any],
        *extra: str,
        name: str = "descheduler",
        env: Mapping[str, str] | None = None,
    ) -> None:
        config_path = tmp / f"{name}-config.json"
        config_path.write_text(json.dumps(config))
        argv = [f"--kubeconfig={kubeconfig}", f"--config={config_path}", f"--addr={EPHEMERAL}", *extra]
        super().__init__(name, "koord.descheduler", argv, tmp / f"{name}.log", env)

    def metrics(self) -> str:
        try:
            status, text = self.get("/metrics")
        except OSError:
            return ""
        return text if status == 200 else ""


def hot_node_config(evictor: Mapping[str, Any] | None = None, *, dry_run: bool = False) -> dict[str, Any]:
    """LowNodeLoad acting at once (one abnormal round), cpu high 1 %: a loaded node must shed its pods;
    ``evictor`` adds MigrationController args to an eviction rate that never holds a test back."""
    return {
        "dryRun": dry_run,
        "profiles": [
            {
                "name": "test",
                "plugins": {"balance": {"enabled": [{"name": "LowNodeLoad"}]}},
                "pluginConfig": [
                    {
                        "name": "LowNodeLoad",
                        "args": {
                            "lowThresholds": {"cpu": 0.5, "memory": 100},
                            "highThresholds": {"cpu": 1, "memory": 100},
                            "anomalyCondition": {"consecutiveAbnormalities": 1},
                        },
                    },
                    {
                        "name": "MigrationController",
                        "args": {"evictQPS": 1000, "evictBurst": 100, **(evictor or {})},
                    },
                ],
            }
        ],
    }
