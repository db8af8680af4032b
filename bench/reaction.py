"""Reaction time of BE CPU suppression to an LS spike, on the real kernel (root).

BE pods burn every CPU, the real agent runs standalone with the cfsQuota policy, and in each trial an LS
process (pre-started, blocked on a pipe) starts burning one core at t0. We record, for 2.5 s at 2 ms
resolution, the BE tier's quota file and its cpuacct counter, then report:

- spike → shrink written: the time of the first BE quota decrease after t0 in the agent's own audit log
  (``/events``; the LS demand probe's steps are left out), against the wall-clock time of the spike;
- spike → BE under budget: first 50 ms window after t0 in which BE's measured CPU is within 10% (or 0.05
  core) of the quota it holds 2.5 s after the spike (its budget for the new LS load). BE's weight
  (cpu.shares 2, as kubelet sets it) already pulls its usage down when LS starts, so this figure can come
  before the write; the write is the agent's own reaction.

Two agent configurations run in the same session: the agent as shipped (fast node sampler at 100 ms feeding
the suppress plugin) and a koordlet-like polling configuration (no fast sampler: 1 s collection + 1 s
strategy loop, koordlet's design). ``ratio`` = fast p99 / polling p99 of spike → write.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from koordlet.api import KubeQOSClass
from koordlet.testing.agent import Agent
from koordlet.testing.cgroups import RealKubepods

CPUS = os.cpu_count() or 1
GATED_BUSY = """
import sys, time
sys.stdin.read(1)
while True:
    pass
"""


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p * (len(ordered) - 1))))]


def read_int(path: Path) -> int:
    return int(path.read_text())


def last_seq(agent: Agent) -> int:
    events = agent.get("/events?limit=1")["events"]
    return int(events[-1]["seq"]) if events else 0


def first_shrink(agent: Agent, since: int, t0_wall: float) -> float | None:
    """Seconds from the spike to the first BE quota decrease the agent wrote (its audit log, wall clock),
    leaving out the LS demand probe's own steps."""
    for e in agent.get(f"/events?since={since}&limit=1000")["events"]:
        if e["resource"] != "cpu.cfs_quota_us" or "probe" in str(e["reason"]) or e["before"] is None:
            continue
        if int(e["after"]) < int(e["before"]) or int(e["before"]) == -1:
            return float(e["time"]) - t0_wall
    return None


def trial(
    kp: RealKubepods, agent: Agent, ls_container: object, quota_file: Path, usage_file: Path, recovered: int
) -> tuple[float | None, float | None]:
    # The LS process starts (and pays its interpreter start-up, which is LS CPU too) well before the
    # spike, blocked on a pipe; meanwhile BE grows back (growth is rate-limited to +10% of the node per
    # interval, so this wait is most of a trial's time) and the 1 s per-pod samples settle.
    proc = kp.spawn(ls_container, GATED_BUSY, stdin=True)  # type: ignore[arg-type]
    started = time.monotonic()
    deadline = started + 30
    while time.monotonic() < deadline and (
        read_int(quota_file) < recovered or time.monotonic() - started < 2.5
    ):
        time.sleep(0.05)
    samples: list[tuple[float, int, int]] = []
    assert proc.stdin is not None
    since = last_seq(agent)
    t0_wall = time.time()
    t0 = time.monotonic()
    proc.stdin.write(b"x")
    proc.stdin.flush()
    end = t0 + 2.5
    while time.monotonic() < end:
        samples.append((time.monotonic() - t0, read_int(quota_file), read_int(usage_file)))
        time.sleep(0.002)
    kp.stop_container(ls_container)  # type: ignore[arg-type]
    written = first_shrink(agent, since, t0_wall)
    final_budget = samples[-1][1] / 100000
    under = None
    j = 0
    for i, (t, _q, u) in enumerate(samples):
        while samples[j][0] < t - 0.05:
            j += 1
        if i == j or t < 0.05:
            continue
        rate = (u - samples[j][2]) / 1e9 / (t - samples[j][0])
        if rate <= final_budget * 1.1 + 0.05:
            under = t
            break
    return written, under


def run_config(label: str, trials: int, extra: list[str]) -> dict[str, float]:
    kp = RealKubepods()
    tmp = Path(tempfile.mkdtemp(prefix="koordlet-reaction-"))
    agent = None
    try:
        be = kp.add_container(kp.add_pod(KubeQOSClass.BESTEFFORT))
        for _ in range(CPUS):
            kp.busy(be)
        ls = kp.add_container(kp.add_pod(KubeQOSClass.BURSTABLE))
        slo = tmp / "nodeslo.yaml"
        slo.write_text(
            "spec:\n  resourceUsedThresholdWithBE:\n    enable: true\n"
            "    cpuSuppressPolicy: cfsQuota\n    cpuSuppressThresholdPercent: 65\n"
        )
        agent = Agent(tmp, f"--cgroup-root=/{kp.parent}", f"--node-slo-file={slo}", *extra)
        agent.wait_ready()
        quota_file = kp.path("cpu", f"{kp.kubepods}/besteffort", "cpu.cfs_quota_us")
        usage_file = kp.path("cpuacct", f"{kp.kubepods}/besteffort", "cpuacct.usage")
        idle = 0
        t_idle = time.monotonic()
        while time.monotonic() - t_idle < 8:
            idle = max(idle, read_int(quota_file))
            time.sleep(0.05)
        if idle <= 0:
            raise RuntimeError(f"the BE quota was never set (agent log: {agent.log})")
        recovered = int(0.6 * idle)
        writes: list[float] = []
        unders: list[float] = []
        for n in range(trials):
            w, u = trial(kp, agent, ls, quota_file, usage_file, recovered)
            if w is not None:
                writes.append(w * 1000)
            if u is not None:
                unders.append(u * 1000)
            print(
                f"  {label} trial {n + 1}/{trials}: write {w and round(w * 1000)} ms, "
                f"under budget {u and round(u * 1000)} ms",
                file=sys.stderr,
                flush=True,
            )
        return {
            "write_median_ms": statistics.median(writes) if writes else -1,
            "write_p99_ms": pct(writes, 0.99) if writes else -1,
            "under_median_ms": statistics.median(unders) if unders else -1,
            "under_p99_ms": pct(unders, 0.99) if unders else -1,
            "missed": trials - len(writes),
        }
    finally:
        if agent is not None:
            agent.stop()
        kp.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer trials and less settling (< 50 s)")
    ap.add_argument("--trials", type=int, default=0)
    args = ap.parse_args()
    # A SIGTERM (e.g. from `timeout`) must still run the cleanup of the cgroups and processes we made.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if os.geteuid() != 0:
        print(json.dumps({"bench": "reaction", "skipped": "needs root to create cgroups"}))
        return
    trials = args.trials or (5 if args.quick else 24)
    fast = run_config("fast", trials, ["--fast-sample-interval=100ms"])
    polling = run_config(
        "polling", max(3, trials // 2) if args.quick else trials, ["--fast-sample-interval=0"]
    )
    out = {"bench": "reaction", "trials": trials}
    out.update({f"fast_{k}": round(v, 1) for k, v in fast.items()})
    out.update({f"polling_{k}": round(v, 1) for k, v in polling.items()})
    out["koordlet_design_ms"] = "1000-2000"
    out["ratio"] = (
        round(fast["write_p99_ms"] / polling["write_p99_ms"], 3) if polling["write_p99_ms"] > 0 else -1
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
