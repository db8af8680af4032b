"""An in-process agent HTTP server on a free loopback port, shut down after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koordshared.runtime.httpconn import Limits
from koordshared.runtime.httpserver import ProcessHTTPServer, text_response

Serve = Callable[..., ProcessHTTPServer]


@pytest.fixture
def serve() -> Iterator[Serve]:
    made: list[ProcessHTTPServer] = []

    def make(limits: Limits | None = None, **kwargs: Any) -> ProcessHTTPServer:
        server = ProcessHTTPServer("127.0.0.1", 0, CollectorRegistry(), limits=limits, **kwargs)
        server.route("/healthz", lambda _q: text_response("ok\n"), probe=True)
        server.route("/hello", lambda q: text_response("hello " + ",".join(q.get("who", [])) + "\n"))
        server.start()
        made.append(server)
        return server

    yield make
    for server in made:
        server.shutdown()
