"""The agent's own state under faults: a SIGKILL at any age, a full or read-only state volume, wall-clock
steps around a checkpoint (F13, F21 and the cases the list missed)."""

from __future__ import annotations

import time
from pathlib import Path

from koordlet import api
from koordlet.metriccache import MetricCache, MetricCacheConfig
from koordlet.testing.agent import Agent


def newest_sample(tsdb: Path, metric: str = api.NODE_CPU_USAGE) -> float | None:
    """Monotonic time of the newest checkpointed sample of ``metric`` (None without any)."""
    cache = MetricCache(MetricCacheConfig(tsdb_path=tsdb))
    cache.load()
    times = [ts for _labels, ts, _value in cache.latest(metric)]
    return max(times) if times else None


def test_sigkill_of_a_young_agent_loses_at_most_half_its_age(tmp_path: Path) -> None:
    # Probing found that a SIGKILL before the first checkpoint (30 s) lost all history; the cache now
    # checkpoints at 2, 6, 14, 30 s... so a kill at age t loses at most t/2 + 2 s.
    started = time.monotonic()
    agent = Agent(tmp_path, "--collect-res-used-interval=200ms")
    try:
        agent.wait_ready()
        time.sleep(max(0.0, started + 8.0 - time.monotonic()))
        killed = time.monotonic()
        agent.proc.kill()
    finally:
        code = agent.stop()
    assert code == -9
    newest = newest_sample(tmp_path / "metric-data")
    assert newest is not None, agent.tail()
    age = killed - started
    lost = killed - newest
    # One checkpoint's duration and the sampling interval on top of the schedule's bound.
    assert lost <= age / 2 + 2.0 + 1.0, (lost, age, agent.tail())
