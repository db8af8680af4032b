"""koord-descheduler in-process against an API server: its real informers, evictor and frameworks, with
rounds run by the caller (``app.run_round()``) instead of on a timer. Independent of pytest."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from prometheus_client import CollectorRegistry

from koordlet.cluster.client import make_api_client
from koordlet.cluster.process import Address
from koordlet.descheduler.app import Descheduler
from koordlet.descheduler.config import DeschedulerConfig, parse_configuration
from koordlet.runtime import Supervisor


@contextmanager
def running_descheduler(
    client_configuration: Any, config: Mapping[str, Any] | None = None, **kw: Any
) -> Iterator[Descheduler]:
    """``config`` is a DeschedulerConfiguration; leader election is off; the caches are synced on entry."""
    cfg = DeschedulerConfig(
        addr=Address("127.0.0.1", 0), configuration=parse_configuration(config or {}), leader_election=False
    )
    app = Descheduler(
        cfg, CollectorRegistry(), api_client=make_api_client(client_configuration=client_configuration), **kw
    )
    stop = threading.Event()
    supervisor = Supervisor(stop)
    app.env.stop = stop
    supervisor.go("events", lambda: app.recorder.run(stop))
    app.informers.start(stop, supervisor)
    try:
        deadline = time.monotonic() + 15
        while not app.informers.has_synced():
            if time.monotonic() > deadline:
                raise AssertionError("koord-descheduler's caches did not sync")
            time.sleep(0.01)
        yield app
    finally:
        stop.set()
        app.informers.close()
        alive = supervisor.join(time.monotonic() + 10)
        app.close()
        assert not alive, f"threads still running: {alive}"
