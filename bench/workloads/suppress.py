"""Workloads of ``bench/reaction.py``: a steady LS load, a busy node's bursts of other work, and the BE
CPU the LS demand probe costs while LS is content. ``bench.reaction`` runs them beside the
real agent; these measure and start processes, they decide nothing."""

from __future__ import annotations

import itertools
import os
import statistics
import time
from pathlib import Path

from koordlet.testing.agent import Agent
from koordlet.testing.cgroups import RealContainer, RealKubepods

CPUS = os.cpu_count() or 1

STEADY_WORK = """
import sys, time
cores = float(sys.argv[1])
slot = 0.01
def spin(n):
    x = 0
    for i in range(n):
        x += i
t0 = time.process_time()
spin(2_000_000)
per_second = 2_000_000 / (time.process_time() - t0)
work = int(per_second * slot * cores)
sys.stdin.read(1)
nxt = time.monotonic()
while True:
    spin(work)  # a fixed amount of work per slot: CPU used stays the same whatever the contention
    nxt += slot
    pause = nxt - time.monotonic()
    if pause > 0:
        time.sleep(pause)
    else:
        nxt = time.monotonic()
"""

BURSTS = """
import random, sys, time
rng = random.Random(int(sys.argv[1]))
while True:
    end = time.perf_counter() + rng.uniform(0.005, 0.06)
    while time.perf_counter() < end:
        pass
    time.sleep(rng.uniform(0.02, 0.2))
"""
"""A busy node's other work (``--busy-node``): bursts of 5-60 ms of a core every 20-200 ms, about a
quarter of a core on average, outside kubepods (the agent counts it as system usage)."""


def last_seq(agent: Agent) -> int:
    events = agent.get("/events?limit=1")["events"]
    return int(events[-1]["seq"]) if events else 0


def read_int(path: Path) -> int:
    return int(path.read_text())


def probe_periods(agent: Agent, since: int, wall_to_mono: float) -> list[tuple[float, float]]:
    """Monotonic (start, end) of every LS demand probe in the audit log since ``since``."""
    periods: list[tuple[float, float]] = []
    start: float | None = None
    for e in agent.get(f"/events?since={since}&limit=10000")["events"]:
        if e["resource"] != "cpu.cfs_quota_us":
            continue
        t = float(e["time"]) - wall_to_mono
        probing = "probe" in str(e["reason"])
        if probing and start is None:
            start = t
        elif not probing and start is not None:
            periods.append((start, t))
            start = None
    if start is not None:
        periods.append((start, float("inf")))
    return periods


def probe_cost(
    kp: RealKubepods,
    agent: Agent,
    ls_container: RealContainer,
    quota_file: Path,
    usage_file: Path,
    seconds: float,
    ls_cores: float,
) -> dict[str, float]:
    """BE CPU lost to the demand probe while a content LS runs (see the module doc)."""
    proc = kp.spawn(ls_container, STEADY_WORK, str(ls_cores), stdin=True)
    assert proc.stdin is not None
    proc.stdin.write(b"x")
    proc.stdin.flush()
    time.sleep(6.0)  # BE's budget follows the new LS load (growth is +10 % of the node per second)
    since = last_seq(agent)
    wall_to_mono = time.time() - time.monotonic()
    samples: list[tuple[float, int, int]] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        samples.append((time.monotonic(), read_int(quota_file), read_int(usage_file)))
        time.sleep(0.02)
    kp.stop_container(ls_container)
    periods = probe_periods(agent, since, wall_to_mono)
    inside = [0.0, 0.0]  # (seconds, BE CPU seconds) inside probes
    total = [0.0, 0.0]
    quotas_outside: list[int] = []
    for (t0, _q0, u0), (t1, q1, u1) in itertools.pairwise(samples):
        mid = (t0 + t1) / 2
        dt, cpu = t1 - t0, (u1 - u0) / 1e9
        total[0] += dt
        total[1] += cpu
        if any(a <= mid < b for a, b in periods):
            inside[0] += dt
            inside[1] += cpu
        else:
            quotas_outside.append(q1)
    outside_rate = (total[1] - inside[1]) / (total[0] - inside[0])
    return {
        "probe_be_lost_pct": (1 - (total[1] / total[0]) / outside_rate) * 100 if outside_rate > 0 else -1,
        "probe_count": len(periods),
        "probe_seconds_inside": inside[0],
        "probe_window_s": total[0],
        "probe_be_cores_outside": outside_rate,
        "probe_be_quota_us_median": statistics.median(quotas_outside) if quotas_outside else -1,
        "probe_step_us": CPUS * 100000 // 10,
    }
