"""Pytest fixtures for the test API server; other test directories import them in their conftest.py::

    from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401

``api_server`` serves the repository's NodeMetric and NodeSLO CRDs and is stopped (watches ended,
connections cut, threads joined) when the test ends, even on failure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.apiserver.manifests import CRD_DIR, DEFAULT_CRDS, NODEMETRIC_CRD, NODESLO_CRD
from tests.apiserver.server import APIServer

__all__ = ["CRD_DIR", "DEFAULT_CRDS", "NODEMETRIC_CRD", "NODESLO_CRD", "api_server", "api_server_factory"]


@pytest.fixture
def api_server_factory() -> Iterator[Callable[..., APIServer]]:
    """Start servers with custom options (``history_limit``, ``bookmark_interval``, ``crds``, ...)."""
    started: list[APIServer] = []

    def make(**options: Any) -> APIServer:
        options.setdefault("crds", DEFAULT_CRDS)
        server = APIServer(**options).start()
        started.append(server)
        return server

    yield make
    for server in reversed(started):
        server.stop()


@pytest.fixture
def api_server(api_server_factory: Callable[..., APIServer]) -> APIServer:
    """A running test API server with the NodeMetric and NodeSLO CRDs registered."""
    return api_server_factory()
