"""koord-scheduler-extender run in-process against an API server, until the block ends (then stopped and
checked to exit 0), or as a child process (:class:`ExtenderProcess`). Independent of pytest."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from koord.scheduler.extender.app import ExtenderApp, ExtenderConfig
from koordshared.kube.client import make_api_client
from koordshared.kube.process import Address
from koordshared.testing.ports import EPHEMERAL
from tests.apiserver import APIServer
from tests.cluster.child import ChildProcess
from tests.managerharness import write_kubeconfig


@contextmanager
def running_extender(
    client_configuration: Any, config: Mapping[str, Any] | None = None, *, tmp: Path | None = None
) -> Iterator[ExtenderApp]:
    """``config`` is a KubeSchedulerConfiguration (written to ``tmp``); the app's ``server.port`` serves."""
    config_file = ""
    if config is not None:
        assert tmp is not None, "a config needs a directory to be written to"
        path = tmp / "extender-config.json"
        path.write_text(json.dumps(config))
        config_file = str(path)
    cfg = ExtenderConfig(addr=Address("127.0.0.1", 0), config_file=config_file, sync_timeout=10.0)
    app = ExtenderApp(
        cfg, CollectorRegistry(), api_client=make_api_client(client_configuration=client_configuration)
    )
    stop = threading.Event()
    code: list[int] = []
    thread = threading.Thread(target=lambda: code.append(app.run(stop)), name="test-extender")
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while not app.ready():
            if time.monotonic() > deadline or not thread.is_alive():
                raise AssertionError("koord-scheduler-extender did not become ready")
            time.sleep(0.01)
        yield app
    finally:
        stop.set()
        thread.join(10)
        app.close()
    assert not thread.is_alive(), "koord-scheduler-extender did not stop"
    assert code == [0], code


class ExtenderProcess(ChildProcess):
    """A real ``koord-scheduler-extender`` child process (``python -m koord.scheduler.extender``) against
    ``server``; ``post(verb, doc)`` calls it as kube-scheduler does; :meth:`stop` sends SIGTERM."""

    def __init__(self, tmp: Path, server: APIServer, *args: str, site: Path | None = None) -> None:
        kubeconfig = write_kubeconfig(tmp / "kubeconfig.json", server)
        super().__init__(
            "koord-scheduler-extender",
            "koord.scheduler.extender",
            [f"--kubeconfig={kubeconfig}", f"--addr={EPHEMERAL}", *args],
            tmp / "extender.log",
            {"PYTHONPATH": str(site)} if site is not None else None,
        )

    def post(self, verb: str, doc: Any) -> tuple[int, Any]:
        req = urllib.request.Request(
            f"{self.base}/{verb}", data=json.dumps(doc).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=5) as r:
            return int(r.status), json.loads(r.read())
