"""Metric cache micro-benchmark: the cache's per-tick append, NodeMetric-style aggregation and checkpoint,
each beside the bare-Python floor doing the same work in the same run (alternating rounds, median).

Floors: appending the tick's values to two ``array('d')`` per series found in a dict (no ring, no lock);
``sorted()`` + ``math.fsum`` per series for the aggregates; writing the same arrays' bytes to a file with
fsync for the checkpoint. Prints one JSON object as its last line; ``ratio`` is the append ratio.

Memory (< 64 MiB at 1000 containers with 30-minute windows): a fresh interpreter imports the
cache, fills 1000 containers x 2 metrics (CPU, memory) at 1 Hz to a 30-minute ring, as the collector
appends them, and reports its RSS after ``gc.collect()``. The floor, in another fresh interpreter with
the same imports, holds only the values in one ``array('d')`` per series (8 bytes a sample, no
timestamps, no labels): what any lossless store of these samples needs at least.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Callable
from pathlib import Path

from koordlet import api
from koordlet.metriccache import MetricCache, MetricCacheConfig

CONTAINERS = 1000
PODS = 1000
HISTORY = 300


class Clock:
    def __init__(self) -> None:
        self.now = 10_000.0

    def __call__(self) -> float:
        return self.now


def _median_time(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


RSS_SCRIPT = """
import gc, sys, time
from array import array
from koordlet import api
from koordlet.metriccache import MetricCache, MetricCacheConfig

def rss_mib():
    gc.collect()
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

containers = tuple(f"containerd://{i:064x}" for i in range(%(containers)d))
config = MetricCacheConfig(pod_retention=%(retention)f, collect_interval=1.0)
ticks = config.capacity_for(api.CONTAINER_CPU_USAGE)
before = rss_mib()
if sys.argv[1] == "agent":
    t = [10_000.0]
    cache = MetricCache(config, clock=lambda: t[0])
    cpu, mem = [0.25] * len(containers), [1.5e9] * len(containers)
    for _ in range(ticks):
        t[0] += 1.0
        cache.append_columns(api.CONTAINER_CPU_USAGE, containers, cpu)
        cache.append_columns(api.CONTAINER_MEMORY_USAGE, containers, mem)
    assert cache.stats().samples == 2 * len(containers) * ticks
else:
    store = {(m, c): array("d", [0.25] * ticks) for m in ("cpu", "mem") for c in containers}
print(before, rss_mib(), ticks)
"""


def rss(who: str, containers: int, retention: float) -> tuple[float, float, int]:
    """(RSS before filling, RSS filled, samples per series) of a fresh interpreter."""
    script = RSS_SCRIPT % {"containers": containers, "retention": retention}
    out = subprocess.run([sys.executable, "-c", script, who], check=True, capture_output=True, text=True)
    before, after, ticks = out.stdout.split()
    return float(before), float(after), int(ticks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds (< 50 s)")
    args = parser.parse_args()
    rounds = 3 if args.quick else 9

    clock = Clock()
    tmp = Path(tempfile.mkdtemp(prefix="koordlet-bench-metriccache-"))
    cache = MetricCache(MetricCacheConfig(tsdb_path=tmp), clock=clock, wall_clock=time.time)
    containers = [f"containerd://{i:064x}" for i in range(CONTAINERS)]
    pods = [f"{i:08x}-0000-4000-8000-000000000000" for i in range(PODS)]
    floor_series: dict[str, tuple[array[float], array[float]]] = {
        k: (array("d"), array("d")) for k in containers + pods
    }

    def agent_tick() -> None:
        clock.now += 1.0
        cache.append_batch(api.CONTAINER_CPU_USAGE, [(c, 0.5) for c in containers])
        cache.append_batch(api.POD_CPU_USAGE, [(p, 1.5) for p in pods])

    def floor_tick() -> None:
        t = clock.now
        for key, v in [(c, 0.5) for c in containers] + [(p, 1.5) for p in pods]:
            ts, vs = floor_series[key]
            ts.append(t)
            vs.append(v)

    for _ in range(HISTORY):  # fill both to the history the aggregates will read
        agent_tick()
        floor_tick()

    append_agent, append_floor = [], []
    for _ in range(rounds):
        append_agent.append(_median_time(agent_tick, 20))
        append_floor.append(_median_time(floor_tick, 20))
    samples_per_tick = CONTAINERS + PODS
    append_agent_us = statistics.median(append_agent) / samples_per_tick * 1e6
    append_floor_us = statistics.median(append_floor) / samples_per_tick * 1e6

    def agent_aggregate() -> None:
        for p in pods:
            cache.aggregate(api.POD_CPU_USAGE, window=HISTORY, labels={"pod_uid": p})

    def floor_aggregate() -> None:
        for p in pods:
            _ts, vs = floor_series[p]
            window = vs[-HISTORY:]
            ordered = sorted(window)
            n = len(ordered)
            _ = [math.fsum(window) / n] + [ordered[max(int(n * q) - 1, 0)] for q in (0.5, 0.9, 0.95, 0.99)]

    agg_agent, agg_floor = [], []
    for _ in range(rounds):
        agg_agent.append(_median_time(agent_aggregate, 1))
        agg_floor.append(_median_time(floor_aggregate, 1))

    floor_file = tmp / "floor.bin"

    def floor_write() -> None:
        fd = os.open(floor_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for ts, vs in floor_series.values():
                os.write(fd, ts.tobytes())
                os.write(fd, vs.tobytes())
            os.fsync(fd)
        finally:
            os.close(fd)

    ckpt_agent, ckpt_floor = [], []
    for _ in range(rounds):
        ckpt_agent.append(_median_time(cache.checkpoint, 1))
        ckpt_floor.append(_median_time(floor_write, 1))
    ckpt_bytes = cache.stats().checkpoint_bytes

    load_s = _median_time(lambda: MetricCache(cache.config, clock=clock).load(), 1)

    for f in tmp.iterdir():
        f.unlink()
    tmp.rmdir()

    agent_rss, floor_rss = [], []
    for _ in range(rounds):
        base, filled, ticks = rss("agent", CONTAINERS, 1800.0)
        agent_rss.append(filled)
        floor_rss.append(rss("floor", CONTAINERS, 1800.0)[1])

    result = {
        "bench": "metriccache",
        "series": CONTAINERS + PODS,
        "samples_per_series": HISTORY,
        "append_us_per_sample": round(append_agent_us, 3),
        "append_floor_us_per_sample": round(append_floor_us, 3),
        "aggregate_1000_pods_ms": round(statistics.median(agg_agent) * 1e3, 2),
        "aggregate_floor_ms": round(statistics.median(agg_floor) * 1e3, 2),
        "aggregate_ratio": round(statistics.median(agg_agent) / statistics.median(agg_floor), 2),
        "checkpoint_ms": round(statistics.median(ckpt_agent) * 1e3, 2),
        "checkpoint_floor_ms": round(statistics.median(ckpt_floor) * 1e3, 2),
        "checkpoint_mib": round(ckpt_bytes / 2**20, 3),
        "load_ms": round(load_s * 1e3, 2),
        "rss_1000_containers_30min_mib": round(statistics.median(agent_rss), 1),
        "rss_floor_values_only_mib": round(statistics.median(floor_rss), 1),
        "rss_imports_mib": round(base, 1),
        "rss_samples_per_series": ticks,
        "ratio": round(append_agent_us / append_floor_us, 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
