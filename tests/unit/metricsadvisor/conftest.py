"""Fixtures of the metrics advisor tests: a Host over the FakeHost tree, a cache on the fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from koordlet.metriccache import MetricCache
from koordlet.system.host import Host
from koordlet.system.podpath import CgroupDriver
from koordlet.testing import FakeClock, FakeStates
from tests.support.recording import RecordingErrors


def make_host(fake_host: Any) -> Host:
    return Host(fake_host.paths, fake_host.mode, CgroupDriver.CGROUPFS)


@pytest.fixture
def cache(fake_clock: FakeClock) -> MetricCache:
    return MetricCache(clock=fake_clock, wall_clock=fake_clock.wall)


@pytest.fixture
def states() -> FakeStates:
    return FakeStates()


@pytest.fixture
def errors() -> RecordingErrors:
    return RecordingErrors()
