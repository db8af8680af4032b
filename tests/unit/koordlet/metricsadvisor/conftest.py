"""Fixtures of the metrics advisor tests: a Host over the FakeHost tree, a cache on the fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from koordlet.metriccache import MetricCache
from koordlet.system.host import Host
from koordlet.testing import FakeClock, FakeStates
from tests.support.recording import RecordingErrors


def make_host(fake_host: Any) -> Host:
    return fake_host.host()


@pytest.fixture
def cache(fake_clock: FakeClock) -> MetricCache:
    return MetricCache(clock=fake_clock, wall_clock=fake_clock.wall)


@pytest.fixture
def states() -> FakeStates:
    return FakeStates()


@pytest.fixture
def errors() -> RecordingErrors:
    return RecordingErrors()


@pytest.fixture(params=["v1", "v2"])
def host_tree(request: pytest.FixtureRequest, fake_host: Any) -> Any:
    """The FakeHost on cgroup v1 and then v2, with the besteffort tier made."""
    if request.param == "v2":
        fake_host.use_cgroup_v2()
    fake_host.mkcgroup(None, "kubepods/besteffort")
    return fake_host
