"""The metrics advisor at 1 Hz over 1000 real container cgroups, against the C floor reading the same files.

Creates N pods (each one pod cgroup + one container cgroup, cgroupfs layout) under a unique
``koordlet-test-<random>`` parent in the v1 cpu, cpuacct, cpuset and memory controllers, and N fake
``PodInfo``s (BE, so the BE collector walks their cpusets too). The real ``MetricsAdvisor`` runs on its
supervisor threads with every collector at its default interval (node, pods/containers, system, BE, PSI,
host apps, the 50 ms fast sampler), storing into the real ``MetricCache``, prefilled to ring capacity so
RSS is measured in steady state. Rounds alternate the agent (process CPU time over the round) with the C
floor of ``bench/host_read.py`` (the same preads and key parsing of the same pod-collector files, on
reused descriptors; its CPU time per sweep, not wall time, which a loaded machine inflates), run twice:
back to back (``floor``: caches hot, the least any loop pays) and paced one sweep a second
(``paced_floor``: the cadence the agent samples at, where every sweep meets caches other work has
cooled; this costs the same C code 1.5-2x more). ``ratio`` = agent CPU / paced floor CPU at 1 Hz (like
for like); ``ratio_hot_floor`` against the back-to-back floor; ``ratio_collection`` leaves out the fast
sampler (measured in rounds without it), which reads two node-level counters 20 times a second whatever
the pod count. A last agent round adds a scraper thread rendering ``/metrics`` every second, to show what
exposition costs and that it does not make the fast sampler late. Everything created is removed.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
from prometheus_client import CollectorRegistry, generate_latest

from koordlet import api
from koordlet.metriccache import MetricCache, MetricCacheConfig, series_key
from koordlet.metricsadvisor.advisor import AdvisorConfig, MetricsAdvisor
from koordlet.system import native
from koordlet.system.cgroups import CgroupMode, detect_mode
from koordlet.system.host import Host
from koordlet.system.paths import HostPaths
from koordlet.system.podpath import CgroupDriver
from koordlet.testing import FakeStates, make_pod
from koordlet.testing.cgroups import RealCgroupTree
from koordshared.runtime.eventbus import EventBus
from koordshared.runtime.lifecycle import Supervisor

if TYPE_CHECKING or __package__:  # python -m bench.collect (make bench; and what mypy checks)
    from bench.host_read import CPU_CLOCK, FLOOR_C
else:  # python bench/collect.py
    from host_read import CPU_CLOCK, FLOOR_C

NAME = "collect"
SUBSYSTEMS = ("cpu", "cpuacct", "cpuset", "memory")
FLOOR_KEYS = ("total_inactive_anon", "total_active_anon", "total_unevictable", "nr_periods", "nr_throttled")
RETENTION = 300.0
CLOCK_OFFSET = 1000.0
"""The agent's clock runs ahead of the prefill timestamps, so live samples append in order after them."""


def skip(why: str) -> int:
    print(json.dumps({"bench": NAME, "skipped": why}))
    return 0


def shifted_clock() -> float:
    return time.monotonic() + CLOCK_OFFSET


def prefill(cache: MetricCache, template: MetricCache) -> int:
    """Fill every series the agent writes to ring capacity, at times before the agent's clock, one batch
    per kind and tick as the collectors append (so series share their kind's timestamps as they would)."""
    n = 0
    base = time.monotonic()
    for metric in template.metrics():
        keys = [series_key(metric, lbl) for lbl in template.series(metric)]
        cap = cache.config.capacity_for(metric)
        for k in range(cap):
            t = base + k * (CLOCK_OFFSET - 10.0) / cap
            n += cache.append_batch(metric, [(key, 0.0) for key in keys], t)
    return n


def rss_mib() -> float:
    gc.collect()
    return psutil.Process().memory_info().rss / (1024 * 1024)


def run_agent(advisor: MetricsAdvisor, seconds: float) -> float:
    """Percent of one core used by the whole process over ``seconds`` of the advisor's steady state.

    Collectors tick at once on start and then on a fixed grid, so the window opens half a period after
    the start: it then holds exactly ``seconds`` ticks of every 1 Hz collector, not one extra.
    """
    stop = threading.Event()
    sup = Supervisor(stop)
    advisor.start(stop, sup)
    try:
        stop.wait(0.5)
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.monotonic()
        stop.wait(seconds)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.monotonic() - t0
    finally:  # also on SIGTERM: the collector threads are not daemons and would keep the process alive
        stop.set()
        sup.join(time.monotonic() + 5.0)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if sup.failed:
        raise RuntimeError(f"advisor thread died: {sup.failures}")
    return cpu / wall * 100.0


def floor_sweep_ms(exe: Path, listing: Path, sweeps: int, pause_ms: int = 0) -> float:
    """The C floor's median CPU ms per sweep; ``pause_ms`` between sweeps paces it like the agent."""
    argv = [str(exe), str(listing), str(sweeps)] + ([str(pause_ms)] if pause_ms else [])
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    return float(out.stdout.strip())


def late_ticks(registry: CollectorRegistry) -> tuple[float, float]:
    """(fast sampler ticks so far, those that started within 10 ms of their slot)."""
    labels = {"collector": "FastSampler"}
    total = registry.get_sample_value("koordlet_collect_lateness_seconds_count", labels) or 0.0
    on_time = registry.get_sample_value("koordlet_collect_lateness_seconds_bucket", {**labels, "le": "0.01"})
    return total, on_time or 0.0


def late_pct(before: tuple[float, float], after: tuple[float, float]) -> float:
    ticks = after[0] - before[0]
    late = ticks - (after[1] - before[1])
    return round(late / ticks * 100.0, 3) if ticks else 0.0


def scrape_loop(registry: CollectorRegistry, stop: threading.Event) -> None:
    """What a Prometheus scraping every second costs the process: one full exposition per second."""
    while not stop.wait(1.0):
        generate_latest(registry)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer, shorter rounds (under 50 s)")
    ap.add_argument("--pods", type=int, default=1000)
    args = ap.parse_args()
    # A SIGTERM (e.g. from `timeout`) must still run the cleanup of the cgroups we made.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if os.geteuid() != 0:
        return skip("needs root to create cgroups")
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        return skip("needs gcc for the C floor")
    paths = HostPaths()
    if detect_mode(paths) is not CgroupMode.V1:
        return skip("needs the cgroup v1 cpu, cpuacct, cpuset and memory controllers")
    if not all((paths.cgroup_root / s).is_dir() for s in SUBSYSTEMS):
        return skip("a v1 controller is missing")
    rounds, seconds, floor_sweeps = (3, 6.0, 9) if args.quick else (5, 20.0, 15)

    tree = RealCgroupTree(SUBSYSTEMS, root=paths.cgroup_root)
    parent = tree.parent
    tmp = Path(tempfile.mkdtemp(prefix="koordlet-bench-"))
    advisor: MetricsAdvisor | None = None
    try:
        tier = tree.mkdir("kubepods/besteffort")
        pods: list[api.PodInfo] = []
        for i in range(args.pods):
            uid = str(uuid.UUID(int=i + 1, version=4))
            cid = f"{i + 1:064x}"
            tree.mkdir(f"kubepods/besteffort/pod{uid}/{cid}")
            pods.append(
                make_pod(
                    f"pod-{i}",
                    uid=uid,
                    cgroup_dir=f"{tier}/pod{uid}",
                    container_ids=[cid],
                    batch_cpu_request_milli=100,
                )
            )
        bench_paths = HostPaths(cgroup_parent=parent)
        host = Host(bench_paths, CgroupMode.V1, CgroupDriver.CGROUPFS)
        states = FakeStates(pods=pods)
        cache_cfg = MetricCacheConfig(
            node_retention=RETENTION, pod_retention=RETENTION, other_retention=RETENTION, collect_interval=1.0
        )

        # discover every series the agent writes, then prefill the real cache to steady state
        # the discovery cache keeps 8 samples a series, so its garbage does not inflate the RSS figures
        scratch = MetricCache(
            dataclasses.replace(cache_cfg, collect_interval=RETENTION / 4), clock=shifted_clock
        )
        probe = MetricsAdvisor(AdvisorConfig(), host, scratch, states, EventBus(), None, shifted_clock)
        probe.collect_once()
        time.sleep(0.2)
        probe.collect_once()
        probe.shutdown()
        registry = CollectorRegistry()
        cache = MetricCache(cache_cfg, clock=shifted_clock, registry=registry)
        prefilled = prefill(cache, scratch)
        del scratch, probe
        advisor = MetricsAdvisor(
            AdvisorConfig(node_name="bench"), host, cache, states, EventBus(), registry, shifted_clock
        )
        advisor.pods.collect()  # builds the reader: its file list is the floor's

        # the C floor over exactly the pod collector's files
        files = advisor.pods.reader_files()
        src = tmp / "floor.c"
        src.write_text(
            FLOOR_C.replace("%KEYS%", ", ".join(f'"{k}"' for k in FLOOR_KEYS)).replace("%CLOCK%", CPU_CLOCK)
        )
        exe = tmp / "floor"
        subprocess.run([gcc, "-O2", "-o", str(exe), str(src)], check=True, capture_output=True)
        listing = tmp / "files.txt"
        listing.write_text("".join(f"{kind} {path}\n" for path, kind in files))

        run_agent(advisor, 3.0)  # warm-up: threads, allocator, every collector past its baseline
        rss_start = rss_mib()
        late_before = late_ticks(registry)
        agent_pct: list[float] = []
        floor_ms: list[float] = []
        paced_ms: list[float] = []
        for r in range(rounds):
            for who in ("agent", "floor") if r % 2 == 0 else ("floor", "agent"):
                if who == "agent":
                    agent_pct.append(run_agent(advisor, seconds))
                else:
                    floor_ms.append(floor_sweep_ms(exe, listing, floor_sweeps))
                    paced_ms.append(floor_sweep_ms(exe, listing, floor_sweeps, pause_ms=1000))
        rss_end = rss_mib()
        late_after = late_ticks(registry)
        # the same advisor without its fast sampler: that one reads two node-level counters 20 times a
        # second whatever the pod count, so it is not part of collecting the 1000 containers
        fast_sampler = advisor.fast
        assert fast_sampler is not None
        advisor.collectors.remove(fast_sampler)
        try:
            no_fast_pct = [run_agent(advisor, seconds) for _ in range(2)]
        finally:
            advisor.collectors.append(fast_sampler)
        # one more agent round with a Prometheus-like scraper rendering /metrics every second
        scraping = threading.Event()
        scraper = threading.Thread(target=scrape_loop, args=(registry, scraping), daemon=True)
        scraper.start()
        try:
            scrape_pct = run_agent(advisor, seconds)
        finally:
            scraping.set()
            scraper.join(10.0)
        late_scraping = late_ticks(registry)
        t0 = time.perf_counter()
        advisor.pods.collect()
        pod_sweep_ms = (time.perf_counter() - t0) * 1000.0
        t0 = time.perf_counter()
        exposition = generate_latest(registry)
        scrape_ms = (time.perf_counter() - t0) * 1000.0
        open_fds = advisor.pods.open_fds()
        synced = advisor.has_synced()
    finally:
        if advisor is not None:
            advisor.shutdown()
        tree.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)

    agent = statistics.median(agent_pct)
    no_fast = statistics.median(no_fast_pct)
    floor_pct = statistics.median(floor_ms) / 1000.0 * 100.0  # one sweep per second
    paced_pct = statistics.median(paced_ms) / 1000.0 * 100.0
    print(f"pods={args.pods} files/sweep={len(files)} rounds={rounds} x {seconds}s", file=sys.stderr)
    print(f"agent % of a core per round: {[round(x, 2) for x in agent_pct]}", file=sys.stderr)
    print(f"floor CPU ms per sweep per round: {[round(x, 2) for x in floor_ms]}", file=sys.stderr)
    print(f"paced floor CPU ms per sweep per round: {[round(x, 2) for x in paced_ms]}", file=sys.stderr)
    print(
        json.dumps(
            {
                "bench": NAME,
                "pods": args.pods,
                "containers": args.pods,
                "files_per_sweep": len(files),
                "native_reader": native.HAS_NATIVE,
                "rounds": rounds,
                "agent_cpu_pct_core": round(agent, 3),
                "floor_cpu_pct_core": round(floor_pct, 3),
                "pod_sweep_ms": round(pod_sweep_ms, 2),
                "fast_ticks_late_over_10ms_pct": late_pct(late_before, late_after),
                "agent_cpu_pct_core_with_1s_scrapes": round(scrape_pct, 3),
                "fast_ticks_late_over_10ms_pct_with_1s_scrapes": late_pct(late_after, late_scraping),
                "agent_cpu_pct_core_without_fast_sampler": round(no_fast, 3),
                "fast_sampler_pct_core": round(agent - no_fast, 3),
                "paced_floor_cpu_pct_core": round(paced_pct, 3),
                "scrape_ms": round(scrape_ms, 2),
                "scrape_kib": round(len(exposition) / 1024, 1),
                "prefilled_samples": prefilled,
                "rss_start_mib": round(rss_start, 1),
                "rss_end_mib": round(rss_end, 1),
                "rss_growth_pct": round((rss_end - rss_start) / rss_start * 100.0, 2),
                "open_fds": open_fds,
                "synced": synced,
                "ratio_hot_floor": round(agent / floor_pct, 3),
                "ratio_collection": round(no_fast / paced_pct, 3),
                "ratio": round(agent / paced_pct, 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
