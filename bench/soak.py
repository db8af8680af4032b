"""Soak: the real agent over 1000 real containers at 1 Hz for an hour, with pod churn and scrapes.

The agent runs as shipped (``koordlet run --standalone``, pods discovered from the cgroup tree) over a
kubelet-like cgroupfs tree of 1000 pods with one container each (half BE, half burstable) under a unique
``koordlet-e2e-<random>`` parent in the v1 cpu, cpuacct, cpuset and memory controllers. Every 6 s the
oldest pod is removed and a new one made (10 pods replaced per minute); every 10 s ``/metrics`` is
scraped (gzip, as Prometheus asks) and the agent process's CPU, RSS and open descriptors are read.

Printed every scrape: elapsed time, CPU (% of one core over the last 10 s), RSS, fds, the pod series
exported and held by the metric cache, and the live pod count. At the end: each quantity's slope per hour
after the warm-up (least squares) and its growth from the first to the last window (1 or 5 minutes) after
the warm-up, which by default ends once the pod rings hold their 10-minute retention (a quick run's does
not: ``rings_filling``),
and the series check: exported pod series equal the live pods once the agent's pod refresh has seen the
churn, and the cache's pod series never exceed the live pods plus the pods removed within the last GC
period and refresh interval. The floor beside each figure is the same agent's own value right after the
warm-up (``ratio`` = RSS at the end / RSS after warm-up). ``--quick`` runs 5 minutes (the issue's
figure; longer than other benchmarks' quick runs). Everything created is removed.

Beside the agent's CPU, the same run measures the collection floor: after the agent stops, the C loop of
``bench/host_read.py`` reads the files the pod sweep reads (CPU counter, ``memory.stat`` and ``cpu.stat`` of
every live pod and container dir) on held descriptors, paced one sweep a second as the agent samples, and
its CPU per sweep is the least any 1 Hz collector of these files pays (``floor_pct_core``).
``collection_pct_core`` is the pod sweep's own CPU over the run (the agent's
``koordlet_collect_cpu_seconds_total`` of ``PodResourceCollector``, its thread's clock: user and kernel
time), ``collection_wall_pct_core`` its wall time (``koordlet_collect_duration_seconds``: waits for the GIL
and the CPU too), and ``collection_ratio`` the CPU beside the floor. ``--profile S`` samples the agent's
threads' CPU clocks for ``S`` seconds after the warm-up (``--enable-pprof``) and prints where the CPU went, by
component and by function; the profiler's own sampling costs CPU, so the headline figure comes from a run
without it. The targets name two sizes: ``--pods 1000`` and ``--pods 100``.

Memory by component: the metric cache's own floor is printed beside RSS (its samples x 8
bytes, what any lossless store of them needs). ``--components`` starts the agent with
``PYTHONTRACEMALLOC`` and reads ``/debug/memory`` every minute: the live traced allocations charged to
the component that made them (``koordlet.metriccache``, ``koordlet.metricsadvisor``, ..., ``imports``),
what tracing itself holds, and the untraced rest of RSS (interpreter, C libraries, thread stacks,
allocator slack). Tracing inflates RSS by its own bookkeeping, so the headline RSS comes from a run
without it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from koordlet.api import KubeQOSClass
from koordlet.metriccache import MetricCacheConfig
from koordlet.metricsadvisor.config import AdvisorConfig
from koordlet.statesinformer.config import InformerConfig
from koordlet.system.cgroups import CgroupMode, detect_mode
from koordlet.system.paths import HostPaths
from koordlet.testing.agent import Agent, free_port
from koordlet.testing.cgroups import RealKubepods, RealPod

if TYPE_CHECKING or __package__:  # python -m bench.soak (and what mypy checks)
    from bench.host_read import CPU_CLOCK, FLOOR_C
else:  # python bench/soak.py
    from host_read import CPU_CLOCK, FLOOR_C

NAME = "soak"
CHURN_EVERY = 6.0  # 10 pods per minute
SCRAPE_EVERY = 10.0
POD_SERIES = re.compile(rb'^koordlet_pod_resource_usage\{[^}]*resource="cpu"', re.M)
CACHE_POD_SERIES = re.compile(rb'^koordlet_metric_cache_series\{metric="pod_cpu_usage"\} (\S+)$', re.M)
CACHE_SAMPLES = re.compile(rb"^koordlet_metric_cache_samples (\S+)$", re.M)
CACHE_PRIVATE = re.compile(rb"^koordlet_metric_cache_private_series (\S+)$", re.M)
TRACE_FRAMES = "6"
"""Enough to look through the standard library to the agent's frame; each frame costs tracing time."""
PROFILE_EVERY = 60.0
MIB = 2**20
COLLECT_SUM = re.compile(
    rb'^koordlet_collect_duration_seconds_sum\{collector="PodResourceCollector"\} (\S+)$', re.M
)
COLLECT_CPU = re.compile(
    rb'^koordlet_collect_cpu_seconds_total\{collector="PodResourceCollector"\} (\S+)$', re.M
)
FLOOR_KEYS = ("total_inactive_anon", "total_active_anon", "total_unevictable", "nr_periods", "nr_throttled")
FLOOR_SWEEPS = 20
COMPONENTS = (
    ("pod sweep", ("koordlet.metricsadvisor.podresource", "koordlet.metricsadvisor.podcolumns")),
    ("fast sampler", ("koordlet.metricsadvisor.fastsampler",)),
    ("exposition", ("koordlet.metricsadvisor.exposition", "koordlet.metricsadvisor.exporter")),
    ("other collectors", ("koordlet.metricsadvisor.",)),
    ("runtime hooks", ("koordlet.runtimehooks.",)),
    ("pods, PLEG, NodeSLO", ("koordlet.statesinformer.",)),
    ("qos plugins", ("qosplugins.", "koordlet.qosmanager.")),
    ("metric cache", ("koordlet.metriccache.",)),
    ("http", ("koordshared.runtime.httpserver",)),
)
"""Where a profiled stack's CPU goes: the first of these with a frame of one of its modules on the stack."""


@dataclass(frozen=True)
class Point:
    t: float
    cpu_pct: float
    rss_mib: float
    fds: int
    exported: int
    cached: int
    live: int
    removed_recent: int
    cache_floor_mib: float
    private: int


def memory_profile(base: str) -> dict[str, Any]:
    """``/debug/memory`` (a snapshot of every traced allocation takes seconds at 1000 pods)."""
    with urllib.request.urlopen(base + "/debug/memory", timeout=300) as r:
        doc: dict[str, Any] = json.loads(r.read())
        return doc


def print_components(first: dict[str, Any], last: dict[str, Any]) -> dict[str, Any]:
    """The per-component table (MiB) after the warm-up and at the end, largest first; returns the end's."""
    names = sorted(last["components"], key=lambda n: -last["components"][n])
    print("component                      after warm-up MiB   end MiB", file=sys.stderr)
    rows = [
        (n, first["components"].get(n, 0), last["components"][n])
        for n in names
        if last["components"][n] >= MIB / 10
    ]
    rows += [
        ("(traced, total)", first["traced"], last["traced"]),
        ("(tracing itself)", first["tracing"], last["tracing"]),
    ]
    rows += [
        ("(untraced: interpreter, C, slack)", first["untraced"], last["untraced"]),
        ("RSS", first["rss"], last["rss"]),
    ]
    for name, a, b in rows:
        print(f"{name:32s} {a / MIB:15.1f} {b / MIB:9.1f}", file=sys.stderr)
    return {n: round(last["components"][n] / MIB, 2) for n in names[:15]}


def scrape(base: str, timeout: float) -> bytes:
    req = urllib.request.Request(base + "/metrics", headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        body = r.read()
        return gzip.decompress(body) if r.headers.get("Content-Encoding") == "gzip" else body


def slope_per_hour(ts: list[float], ys: list[float]) -> float:
    if len(ts) < 2:
        return 0.0
    mt, my = statistics.fmean(ts), statistics.fmean(ys)
    den = sum((t - mt) ** 2 for t in ts)
    return sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True)) / den * 3600 if den else 0.0


def growth_pct(points: list[Point], attr: str, window: float) -> float:
    """Mean over the last ``window`` seconds against the mean over the first ``window`` (after warm-up)."""
    t0, t1 = points[0].t, points[-1].t
    first = [float(getattr(p, attr)) for p in points if p.t <= t0 + window]
    last = [float(getattr(p, attr)) for p in points if p.t >= t1 - window]
    base = statistics.fmean(first)
    return (statistics.fmean(last) - base) / base * 100 if base else 0.0


def component_of(stack: list[str]) -> str:
    """The first component (in :data:`COMPONENTS` order, most specific first) with a frame on the stack."""
    for name, prefixes in COMPONENTS:
        if any(frame.startswith(prefixes) for frame in stack):
            return name
    return "other"


def print_profile(collapsed: str, wall: float) -> dict[str, float]:
    """The profile by component and the top functions by own CPU (% of a core); returns the components."""
    by_comp: dict[str, float] = {}
    own: dict[str, float] = {}
    for line in collapsed.splitlines():
        stack_text, _, us = line.rpartition(" ")
        frames = stack_text.split(";")[1:]  # the thread name first
        cpu = int(us) / 1e6 / wall * 100
        comp = component_of(frames)
        by_comp[comp] = by_comp.get(comp, 0.0) + cpu
        if frames:
            own[frames[-1]] = own.get(frames[-1], 0.0) + cpu
    print(f"profile over {wall:.0f} s, % of a core by component:", file=sys.stderr)
    for comp, pct in sorted(by_comp.items(), key=lambda kv: -kv[1]):
        print(f"  {pct:6.2f}  {comp}", file=sys.stderr)
    print("top functions by own CPU (% of a core):", file=sys.stderr)
    for fn, pct in sorted(own.items(), key=lambda kv: -kv[1])[:25]:
        print(f"  {pct:6.2f}  {fn}", file=sys.stderr)
    return {k: round(v, 3) for k, v in by_comp.items()}


def floor_pct(kp: RealKubepods, tmp: Path, sweeps: int) -> float | None:
    """The paced C floor over the live pods' sweep files: % of a core at one sweep a second."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        return None
    src, exe, listing = tmp / "floor.c", tmp / "floor", tmp / "files.txt"
    src.write_text(
        FLOOR_C.replace("%KEYS%", ", ".join(f'"{k}"' for k in FLOOR_KEYS)).replace("%CLOCK%", CPU_CLOCK)
    )
    subprocess.run([gcc, "-O2", "-o", str(exe), str(src)], check=True, capture_output=True)
    rows = []
    for pod in kp.pods:
        for d in (pod.cgroup_dir, *(c.cgroup_dir for c in pod.containers)):
            rows.append(f"0 {kp.path('cpuacct', d, 'cpuacct.usage')}\n")
            rows.append(f"1 {kp.path('memory', d, 'memory.stat')}\n")
            rows.append(f"1 {kp.path('cpu', d, 'cpu.stat')}\n")
    listing.write_text("".join(rows))
    out = subprocess.run(
        [str(exe), str(listing), str(sweeps), "1000"], check=True, capture_output=True, text=True
    )
    return float(out.stdout.strip()) / 10.0  # ms of CPU per 1000 ms


def skip(why: str) -> int:
    print(json.dumps({"bench": NAME, "skipped": why}))
    return 0


def new_pod(kp: RealKubepods, i: int) -> RealPod:
    pod = kp.add_pod(KubeQOSClass.BESTEFFORT if i % 2 else KubeQOSClass.BURSTABLE)
    kp.add_container(pod)
    return pod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="5 minutes")
    ap.add_argument("--minutes", type=float, default=None, help="run length (default 60, --quick 5)")
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--components", action="store_true", help="trace allocations: memory by component")
    ap.add_argument("--agent-arg", action="append", default=[], help="an extra agent flag (repeatable)")
    ap.add_argument("--profile", type=float, default=0.0, help="seconds of CPU profile after the warm-up")
    ap.add_argument("--profile-out", default="", help="also write the profile's collapsed stacks here")
    ap.add_argument("--floor-sweeps", type=int, default=FLOOR_SWEEPS, help="paced C floor sweeps (0: none)")
    ap.add_argument(
        "--warmup", type=float, default=None, help="seconds left out of slopes (default 900, --quick 60)"
    )
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still stop the agent and remove the cgroups
    if os.geteuid() != 0:
        return skip("needs root to create cgroups")
    if detect_mode(HostPaths()) is not CgroupMode.V1:
        return skip("needs the cgroup v1 cpu, cpuacct, cpuset and memory controllers")
    minutes = args.minutes or (5.0 if args.quick else 60.0)
    # until the pod rings hold their 10-minute retention they grow by design; a full run leaves that out
    warmup = args.warmup if args.warmup is not None else (60.0 if args.quick else 900.0)
    gc_period = AdvisorConfig().gc_interval
    refresh = InformerConfig(node_name="soak").kubelet_sync_interval
    kp = RealKubepods()
    tmp = Path(tempfile.mkdtemp(prefix="koordlet-soak-"))
    agent: Agent | None = None
    points: list[Point] = []
    profiles: list[tuple[float, dict[str, Any]]] = []
    try:
        print(f"building {args.pods} pods ...", file=sys.stderr, flush=True)
        made = 0
        for _ in range(args.pods):
            new_pod(kp, made)
            made += 1
        env = {"PYTHONTRACEMALLOC": TRACE_FRAMES} if args.components else {}
        pprof = ["--enable-pprof", f"--pprof-addr=127.0.0.1:{free_port()}"] if args.profile else []
        agent = Agent(tmp, f"--cgroup-root=/{kp.parent}", *pprof, *args.agent_arg, env=env)
        agent.wait_ready(timeout=180.0)
        profiled: dict[str, str] = {}
        profile_thread: threading.Thread | None = None
        next_profile = time.monotonic() + PROFILE_EVERY
        proc = psutil.Process(agent.proc.pid)
        removed: deque[float] = deque()
        collect_sums: list[tuple[float, float]] = []
        collect_cpu: list[tuple[float, float]] = []
        start = time.monotonic()
        next_churn = start + CHURN_EVERY
        next_scrape = start + SCRAPE_EVERY
        cpu_prev, t_prev = sum(proc.cpu_times()[:2]), start
        print(
            "   t(s)  cpu%   rss MiB  fds  exported  cached  live  floor MiB  private",
            file=sys.stderr,
            flush=True,
        )
        while (now := time.monotonic()) < start + minutes * 60:
            if now >= next_churn:
                next_churn += CHURN_EVERY
                kp.remove_pod(kp.pods[0])
                removed.append(time.monotonic())
                new_pod(kp, made)
                made += 1
            if args.profile and profile_thread is None and now >= start + warmup:
                url = f"http://{pprof[1].split('=', 1)[1]}/debug/pprof/profile?seconds={args.profile}"

                def fetch(url: str = url) -> None:
                    with urllib.request.urlopen(url, timeout=args.profile + 60) as r:
                        profiled["collapsed"] = r.read().decode()

                profile_thread = threading.Thread(target=fetch, daemon=True)
                profile_thread.start()
            if args.components and now >= next_profile:
                next_profile += PROFILE_EVERY
                profiles.append((now - start, memory_profile(agent.base)))
            if now >= next_scrape:
                next_scrape += SCRAPE_EVERY
                body = scrape(agent.base, 60.0 if args.components else 10.0)  # tracing slows the agent
                if (m := COLLECT_SUM.search(body)) is not None:
                    collect_sums.append((time.monotonic() - start, float(m.group(1))))
                if (m := COLLECT_CPU.search(body)) is not None:
                    collect_cpu.append((time.monotonic() - start, float(m.group(1))))
                cpu = sum(proc.cpu_times()[:2])
                t = time.monotonic()
                cached = CACHE_POD_SERIES.search(body)
                samples = CACHE_SAMPLES.search(body)
                private = CACHE_PRIVATE.search(body)
                while removed and removed[0] < t - gc_period - refresh:
                    removed.popleft()
                p = Point(
                    t=t - start,
                    cpu_pct=(cpu - cpu_prev) / (t - t_prev) * 100,
                    rss_mib=proc.memory_info().rss / 2**20,
                    fds=proc.num_fds(),
                    exported=len(POD_SERIES.findall(body)),
                    cached=int(float(cached.group(1))) if cached else -1,
                    live=len(kp.pods),
                    removed_recent=len(removed),
                    cache_floor_mib=float(samples.group(1)) * 8 / MIB if samples else -1.0,
                    private=int(float(private.group(1))) if private else -1,
                )
                cpu_prev, t_prev = cpu, t
                points.append(p)
                print(
                    f"{p.t:7.0f} {p.cpu_pct:5.1f} {p.rss_mib:9.1f} {p.fds:4d} {p.exported:9d} "
                    f"{p.cached:7d} {p.live:5d} {p.cache_floor_mib:8.1f} {p.private:7d}",
                    file=sys.stderr,
                    flush=True,
                )
            time.sleep(max(0.0, min(next_churn, next_scrape) - time.monotonic()))
        if profile_thread is not None:
            profile_thread.join(timeout=args.profile + 60)
        status = agent.stop()
        agent = None
        floor = floor_pct(kp, tmp, args.floor_sweeps) if args.floor_sweeps > 0 else None
    finally:
        if agent is not None:
            agent.stop()
        kp.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    steady = [p for p in points if p.t >= warmup]
    if len(steady) < 3:
        raise SystemExit(f"too short: {len(steady)} points after a {warmup:.0f} s warm-up")
    window = 60.0 if minutes * 60 - warmup < 900 else 300.0
    ts = [p.t for p in steady]
    # exported pod series lag the churn by at most one pod refresh (10 s) plus one scrape interval
    lag_pods = int((refresh + SCRAPE_EVERY) / CHURN_EVERY) + 1
    exported_off = max(abs(p.exported - p.live) for p in steady)
    cache_excess = max(p.cached - p.live - p.removed_recent for p in steady)
    figures = {
        "bench": NAME,
        "minutes": minutes,
        "pods": args.pods,
        "pods_replaced": made - args.pods,
        "scrapes": len(points),
        "warmup_s": warmup,
        "cpu_pct_core_median": round(statistics.median(p.cpu_pct for p in steady), 2),
        "cpu_pct_core_max": round(max(p.cpu_pct for p in steady), 2),
        "cpu_slope_pct_per_h": round(slope_per_hour(ts, [p.cpu_pct for p in steady]), 3),
        "rss_mib_after_warmup": round(steady[0].rss_mib, 1),
        "rss_mib_end": round(steady[-1].rss_mib, 1),
        "rss_growth_pct": round(growth_pct(steady, "rss_mib", window), 2),
        "rss_slope_mib_per_h": round(slope_per_hour(ts, [p.rss_mib for p in steady]), 3),
        "fds_after_warmup": steady[0].fds,
        "fds_end": steady[-1].fds,
        "fds_growth_pct": round(growth_pct(steady, "fds", window), 2),
        "fds_slope_per_h": round(slope_per_hour(ts, [float(p.fds) for p in steady]), 3),
        "series_slope_per_h": round(slope_per_hour(ts, [float(p.cached) for p in steady]), 3),
        "exported_minus_live_max": exported_off,
        "exported_lag_bound_pods": lag_pods,
        "cache_excess_over_live_and_recent_max": cache_excess,
        "gc_period_s": gc_period,
        "growth_window_s": window,
        "rings_filling": warmup < MetricCacheConfig().pod_retention,
        "cache_floor_mib_end": round(steady[-1].cache_floor_mib, 1),
        "cache_private_series_end": steady[-1].private,
        "traced": bool(args.components),
        "agent_exit": status,
        "ratio": round(steady[-1].rss_mib / steady[0].rss_mib, 4),
    }
    for name, series in (("collection_wall_pct_core", collect_sums), ("collection_pct_core", collect_cpu)):
        steady_sums = [(t, v) for t, v in series if t >= warmup]
        if len(steady_sums) >= 2:
            (t0, v0), (t1, v1) = steady_sums[0], steady_sums[-1]
            figures[name] = round((v1 - v0) / (t1 - t0) * 100, 3)
    if floor is not None:
        figures["floor_pct_core"] = round(floor, 3)
        if "collection_pct_core" in figures:
            figures["collection_ratio"] = round(float(figures["collection_pct_core"]) / floor, 3)
    if "collapsed" in profiled:
        if args.profile_out:
            Path(args.profile_out).write_text(profiled["collapsed"])
        figures["profile_s"] = args.profile
        figures["profile_pct_core"] = print_profile(profiled["collapsed"], args.profile)
    after = [doc for t, doc in profiles if t >= warmup]
    if after:
        figures["components_mib_end"] = print_components(after[0], after[-1])
        figures["untraced_mib_end"] = round(after[-1]["untraced"] / MIB, 1)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
