"""The agent's own state under faults: a SIGKILL at any age, a full or read-only state volume, wall-clock
steps around a checkpoint (F13, F21 and the cases the list missed)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from koordlet import api
from koordlet.metriccache import MetricCache, MetricCacheConfig
from koordlet.metriccache.checkpoint import FILE_NAME
from koordlet.testing import wait_until
from koordlet.testing.agent import Agent
from tests.faults.probes import samples, total, tracebacks


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


SHIM = Path(__file__).resolve().parent / "clockshim"


def checkpoints(agent: Agent) -> float:
    return total(agent, "koordlet_metric_cache_checkpoints")


@pytest.mark.slow
def test_wall_clock_steps_around_checkpoints(tmp_path: Path) -> None:
    # F13 and a clock jump during checkpoints: rates and windows follow the monotonic clock; samples a
    # stepped-forward clock stamped come back "from the future" after the step is undone and are dropped
    # at load, never shadowing new samples; nothing in the file is ever ahead of the real clock.
    offset = tmp_path / "clock-offset"
    offset.write_text("0")
    env = {"PYTHONPATH": str(SHIM), "KOORDLET_TEST_CLOCK_FILE": str(offset)}
    bound = (os.cpu_count() or 1) * 1.1
    first = Agent(tmp_path, "--collect-res-used-interval=200ms", env=env)
    try:
        first.wait_ready()
        assert wait_until(lambda: checkpoints(first) >= 1, 10), first.tail()
        cpu = {"resource": "cpu"}
        for step, checkpointed in (("3600", True), ("-3600", False), ("3600", False)):
            offset.write_text(step)
            if checkpointed:  # one checkpoint stamped an hour ahead (and the final one at stop)
                done = checkpoints(first)

                def checkpointed_again(n: float = done) -> bool:
                    return checkpoints(first) > n

                assert wait_until(checkpointed_again, 20, step=0.2), first.tail()
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                usage = [v for _labels, v in samples(first, "koordlet_node_resource_usage", **cpu)]
                assert usage and all(0 <= v <= bound for v in usage), usage
                time.sleep(0.2)
        assert total(first, "koordlet_metric_cache_checkpoint_errors") == 0
    finally:
        assert first.stop() == 0, first.tail()  # the final checkpoint is stamped an hour ahead
    offset.write_text("0")
    second = Agent(tmp_path, "--collect-res-used-interval=200ms", env=env)
    try:
        second.wait_ready()
        assert wait_until(lambda: checkpoints(second) >= 1, 10), second.tail()
        time.sleep(0.5)
    finally:
        assert second.stop() == 0, second.tail()
    newest = newest_sample(tmp_path / "metric-data")
    assert newest is not None and newest <= time.monotonic() + 1.0
    assert tracebacks(first) == [] and tracebacks(second) == []


@contextlib.contextmanager
def tmpfs(where: Path, *options: str) -> Iterator[Path]:
    """A tmpfs mounted at ``where`` for the test (root), unmounted afterwards."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "koordlet-test", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.slow
@pytest.mark.root
def test_a_full_disk_under_the_checkpoint_keeps_the_last_good_file(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "metric-data", "size=512k") as data:
        agent = Agent(tmp_path, "--collect-res-used-interval=200ms")
        try:
            agent.wait_ready()
            assert wait_until((data / FILE_NAME).exists, 10), agent.tail()
            filler = data / "filler"
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
            try:  # fill the volume to the last block
                while os.write(fd, b"\0" * 4096) > 0:
                    pass
            except OSError:
                pass
            finally:
                os.close(fd)
            assert wait_until(lambda: total(agent, "koordlet_metric_cache_checkpoint_errors") >= 1, 20)
            assert newest_sample(data) is not None  # the last good checkpoint is intact
            assert [p.name for p in data.iterdir() if ".tmp." in p.name] == []
            filler.unlink()
            done = checkpoints(agent)
            assert wait_until(lambda: checkpoints(agent) > done, 35, step=0.2), agent.tail()
        finally:
            code = agent.stop()
        assert code == 0, agent.tail()
    log = agent.log.read_text()
    assert log.count("metric cache checkpoint failed") == 1 and "written again" in log
    assert tracebacks(agent) == []


@pytest.mark.root
def test_a_read_only_var_run_costs_a_log_line_not_the_agent(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "run", "ro", "size=64k"):
        agent = Agent(tmp_path)
        try:
            agent.wait_ready()
            errors = {"result": "error"}
            assert wait_until(lambda: total(agent, "koordlet_nodemetric_report_total", **errors) >= 2, 10)
            assert agent.get("/nodemetric")["nodeMetric"]  # still served from memory
        finally:
            code = agent.stop()
        assert code == 0, agent.tail()
    log = agent.log.read_text()
    assert log.count("nodemetric: cannot write") == 1
    assert tracebacks(agent) == []
