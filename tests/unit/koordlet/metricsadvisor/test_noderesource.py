"""NodeResourceCollector on a FakeHost procfs: koordlet's busy ticks, MemTotal - MemAvailable."""

from __future__ import annotations

from typing import Any

import pytest

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.noderesource import NodeResourceCollector, NodeResourceConfig
from koordlet.testing import FakeClock
from tests.support.recording import RecordingErrors

CPU2 = ((0, 0, 0, 0), (0, 0, 0, 0))


def make(
    fake_host: Any, cache: MetricCache, clock: FakeClock, errors: RecordingErrors
) -> tuple[NodeResourceCollector, fw.SharedState]:
    shared = fw.SharedState()
    col = NodeResourceCollector(
        NodeResourceConfig(1.0, clk_tck=100),
        fw.Options(cache=cache, clock=clock, errors=errors, paths=fake_host.paths, shared=shared),
    )
    return col, shared


def last(cache: MetricCache, metric: str) -> float | None:
    got = cache.latest(metric)
    return got[0][2] if got else None


def test_cpu_is_busy_ticks_over_dt_times_clk_tck(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fake_host.write_proc_stat(
        user=1000, nice=10, system=500, idle=9000, iowait=300, irq=5, softirq=7, steal=40, per_cpu=CPU2
    )
    fake_host.write_meminfo(total_kib=8 * 1024 * 1024, available_kib=6 * 1024 * 1024)
    col, shared = make(fake_host, cache, fake_clock, errors)
    col.collect()
    assert cache.latest(api.NODE_CPU_USAGE) == []  # first round: baseline only
    assert not col.has_synced()
    fake_clock.advance(2.0)
    # +120 user, +30 system, +10 irq, +4 softirq, +2 nice; idle/iowait/steal grow too but do not count
    fake_host.write_proc_stat(
        user=1120, nice=12, system=530, idle=9200, iowait=400, irq=15, softirq=11, steal=90, per_cpu=CPU2
    )
    col.collect()
    expected = (120 + 2 + 30 + 10 + 4) / (2.0 * 100)
    assert last(cache, api.NODE_CPU_USAGE) == pytest.approx(expected)
    assert last(cache, api.NODE_MEMORY_USAGE) == 2 * 1024 * 1024 * 1024
    node_cpu = shared.get(fw.NODE_CPU)
    assert node_cpu is not None and node_cpu.value == pytest.approx(expected)
    assert col.has_synced()
    col.close()


def test_counter_reset_gives_no_sample_then_recovers(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fake_host.write_proc_stat(user=5000, per_cpu=CPU2)
    fake_host.write_meminfo(1000, 500)
    col, _ = make(fake_host, cache, fake_clock, errors)
    col.collect()
    fake_clock.advance(1.0)
    fake_host.write_proc_stat(user=100, per_cpu=CPU2)
    col.collect()
    assert cache.latest(api.NODE_CPU_USAGE) == []
    assert errors.kind(fw.ERR_COUNTER_RESET) == 1
    fake_clock.advance(1.0)
    fake_host.write_proc_stat(user=150, per_cpu=CPU2)
    col.collect()
    assert last(cache, api.NODE_CPU_USAGE) == pytest.approx(0.5)


def test_a_rate_above_capacity_is_discarded(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fake_host.write_proc_stat(user=0, per_cpu=CPU2)
    fake_host.write_meminfo(1000, 500)
    col, _ = make(fake_host, cache, fake_clock, errors)
    col.collect()
    fake_clock.advance(1.0)
    fake_host.write_proc_stat(user=300, per_cpu=CPU2)  # 3 cores on a 2-CPU host
    col.collect()
    assert cache.latest(api.NODE_CPU_USAGE) == []
    assert errors.kind(fw.ERR_OVER_CAPACITY) == 1


def test_a_long_pause_rebaselines(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fake_host.write_proc_stat(user=0, per_cpu=CPU2)
    fake_host.write_meminfo(1000, 500)
    col, _ = make(fake_host, cache, fake_clock, errors)
    col.collect()
    fake_clock.advance(11.0)  # VM paused: more than 10 intervals
    fake_host.write_proc_stat(user=100, per_cpu=CPU2)
    col.collect()
    assert cache.latest(api.NODE_CPU_USAGE) == []
    assert errors.kind(fw.ERR_CLOCK) == 1


def test_malformed_files_are_counted_and_skipped(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fake_host.write("proc/stat", "cpu  1 2 x 4 5 6 7\n")
    fake_host.write("proc/meminfo", "MemTotal: 100 kB\n")  # no MemAvailable
    col, _ = make(fake_host, cache, fake_clock, errors)
    col.collect()
    assert errors.kind(fw.ERR_MALFORMED) == 2
    assert cache.latest(api.NODE_MEMORY_USAGE) == []
