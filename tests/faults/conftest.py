"""Fixtures of the fault matrix (``docs/reliability.md``): the real-kernel and API-server ones the
integration tests use."""

from __future__ import annotations

from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401 (fixtures)
from tests.integration.conftest import kubepods  # noqa: F401 (fixture)
