"""Fixtures shared by the integration tests on the real kernel."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from koordlet.testing.cgroups import RealKubepods
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401 (fixtures)
from tests.integration.cluster import cluster_factory  # noqa: F401 (fixture)


@pytest.fixture
def kubepods() -> Iterator[RealKubepods]:
    """A kubelet-like kubepods tree under a unique parent, removed (with its processes) afterwards."""
    kp = RealKubepods()
    try:
        yield kp
    finally:
        kp.cleanup()
