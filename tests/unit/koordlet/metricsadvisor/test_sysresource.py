"""SystemResourceCollector: node - pods - host apps, floored at 0, only from fresh inputs."""

from __future__ import annotations

import pytest

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.sysresource import SystemResourceCollector, SystemResourceConfig
from koordlet.testing import FakeClock
from tests.support.recording import RecordingErrors


def values(cache: MetricCache, metric: str) -> list[float]:
    return [v for _l, _t, v in cache.latest(metric)]


def make(
    cache: MetricCache,
    clock: FakeClock,
    errors: RecordingErrors,
    shared: fw.SharedState,
    *,
    host_apps: bool = True,
) -> SystemResourceCollector:
    return SystemResourceCollector(
        SystemResourceConfig(1.0, 10.0),
        fw.Options(cache=cache, clock=clock, errors=errors, shared=shared),
        host_apps_enabled=host_apps,
    )


def test_system_is_node_minus_pods_minus_host_apps(
    cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    shared = fw.SharedState()
    now = fake_clock()
    shared.set(fw.NODE_CPU, now, 1.75)
    shared.set(fw.PODS_CPU, now, 1.0)
    shared.set(fw.HOST_APPS_CPU, now, 0.25)
    shared.set(fw.NODE_MEMORY, now, 8000.0)
    shared.set(fw.PODS_MEMORY, now, 5000.0)
    shared.set(fw.HOST_APPS_MEMORY, now, 1000.0)
    col = make(cache, fake_clock, errors, shared)
    col.collect()
    assert values(cache, api.SYS_CPU_USAGE) == [pytest.approx(0.5)]
    assert values(cache, api.SYS_MEMORY_USAGE) == [2000.0]
    assert col.has_synced()


def test_negative_difference_is_floored_at_zero(
    cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    shared = fw.SharedState()
    now = fake_clock()
    for key, v in ((fw.NODE_CPU, 1.0), (fw.PODS_CPU, 1.2), (fw.NODE_MEMORY, 10.0), (fw.PODS_MEMORY, 11.0)):
        shared.set(key, now, v)
    make(cache, fake_clock, errors, shared).collect()
    assert values(cache, api.SYS_CPU_USAGE) == [0.0]
    assert values(cache, api.SYS_MEMORY_USAGE) == [0.0]


def test_stale_or_missing_inputs_produce_nothing(
    cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    shared = fw.SharedState()
    shared.set(fw.NODE_CPU, fake_clock(), 1.0)
    shared.set(fw.PODS_CPU, fake_clock() - 11.0, 0.5)  # older than the outdated interval
    shared.set(fw.NODE_MEMORY, fake_clock(), 1.0)  # pods memory never published
    col = make(cache, fake_clock, errors, shared)
    col.collect()
    assert cache.latest(api.SYS_CPU_USAGE) == []
    assert cache.latest(api.SYS_MEMORY_USAGE) == []
    assert errors.kind("stale_inputs") == 1
    assert not col.has_synced()


def test_a_stale_host_app_figure_blocks_but_an_absent_one_counts_as_zero(
    cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    shared = fw.SharedState()
    now = fake_clock()
    shared.set(fw.NODE_CPU, now, 1.0)
    shared.set(fw.PODS_CPU, now, 0.25)
    shared.set(fw.HOST_APPS_CPU, now - 30.0, 0.5)
    make(cache, fake_clock, errors, shared).collect()
    assert cache.latest(api.SYS_CPU_USAGE) == []
    shared.clear(fw.HOST_APPS_CPU)
    make(cache, fake_clock, errors, shared).collect()
    assert values(cache, api.SYS_CPU_USAGE) == [pytest.approx(0.75)]
