"""What a ``/metrics`` scrape costs at 1000 pods, and whether 20 scrapers hammering it make sampling late.

The real ``MetricsAdvisor`` runs on its supervisor threads over 1000 real pod + container cgroups (a
kubelet-like cgroupfs tree under a unique ``koordlet-e2e-<random>`` parent in the v1 cpu, cpuacct, cpuset
and memory controllers), and the agent's HTTP server serves on loopback both the agent's ``/metrics``
(rendered once per pod sweep, served as bytes, gzip when asked) and, as the floor it replaces,
``/metrics-on-demand``: ``generate_latest`` of the same registry on every request (the server's default
route, what the agent did before). This process is the agent; the scrapers are another process.

Figures: one scraper's sequential request wall time per route (median; identity and gzip), the render
and ``generate_latest`` times in process; then phases of ``--seconds`` each — no scrapers, 20 scrapers
on ``/metrics``, 20 on ``/metrics-on-demand`` (half ask gzip; each at most ``--rate`` requests/s, so the
request count is bounded, and each phase ends on time) — with the agent's CPU per scrape and the
lateness (start minus planned start) of the 100 ms fast sampler and of the 1 s pod sweep, p50/p99/max,
from the supervisor's own tick hook. ``ratio`` = agent scrape time / on-demand scrape time. Everything
created is removed.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor.advisor import AdvisorConfig, MetricsAdvisor
from koordlet.system.cgroups import CgroupMode, detect_mode
from koordlet.system.host import Host
from koordlet.system.paths import HostPaths
from koordlet.system.podpath import CgroupDriver
from koordlet.testing import FakeStates
from koordlet.testing.cgroups import RealKubepods
from koordshared.runtime.eventbus import EventBus
from koordshared.runtime.httpserver import ProcessHTTPServer
from koordshared.runtime.lifecycle import Supervisor

NAME = "scrape"
FAST = "FastSampler"
PODS = "PodResourceCollector"

SCRAPER = r"""
import gzip, json, sys, threading, time, urllib.request
url, threads, rate, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
lat, errors, lock = [], [0], threading.Lock()
start = time.monotonic()
end = start + seconds
def scraper(i):
    headers = {"Accept-Encoding": "gzip"} if i % 2 == 0 else {}
    k = 0
    while True:
        due = start + k / rate if rate > 0 else time.monotonic()
        if due >= end or time.monotonic() >= end:
            return
        time.sleep(max(0.0, due - time.monotonic()))
        k += 1
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
                body = r.read()
                if r.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
            ok = body.startswith(b"# HELP")
        except OSError:
            ok = False
        with lock:
            if ok:
                lat.append(time.monotonic() - t0)
            else:
                errors[0] += 1
ts = [threading.Thread(target=scraper, args=(i,)) for i in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
print(json.dumps({"latencies": lat, "errors": errors[0], "wall": time.monotonic() - start}))
"""


@dataclass
class TickLog:
    """Every collector tick's (when, collector, lateness, duration), from the supervisor's hook."""

    ticks: list[tuple[float, str, float, float]] = field(default_factory=list)

    def hook(self, inner: Callable[[str, float, float], None]) -> Callable[[str, float, float], None]:
        def on_tick(collector: str, duration: float, lateness: float) -> None:
            self.ticks.append((time.monotonic(), collector, lateness, duration))
            inner(collector, duration, lateness)

        return on_tick

    def lateness_ms(self, collector: str, t0: float, t1: float) -> list[float]:
        return [late * 1000 for t, c, late, _ in self.ticks if c == collector and t0 <= t < t1]


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def spread(xs: list[float]) -> dict[str, float]:
    """p50, p99 and max of ``xs``."""
    return {
        "p50": round(pct(xs, 0.5), 2),
        "p99": round(pct(xs, 0.99), 2),
        "max": round(max(xs, default=0), 2),
    }


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@dataclass
class Node:
    """The in-process agent pieces over real cgroups: advisor, registry, HTTP server."""

    advisor: MetricsAdvisor
    registry: CollectorRegistry
    http: ProcessHTTPServer
    ticks: TickLog

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.http.port}{path}"


@contextmanager
def node(pods: int) -> Iterator[Node]:
    kp = RealKubepods()
    advisor: MetricsAdvisor | None = None
    http: ProcessHTTPServer | None = None
    stop = threading.Event()
    sup = Supervisor(stop)
    try:
        infos: list[api.PodInfo] = []
        for i in range(pods):
            pod = kp.add_pod(api.KubeQOSClass.BESTEFFORT if i % 2 else api.KubeQOSClass.BURSTABLE)
            kp.add_container(pod)
            infos.append(pod.info())
        host = Host(HostPaths(cgroup_parent=kp.parent), CgroupMode.V1, CgroupDriver.CGROUPFS)
        registry = CollectorRegistry()
        cache = MetricCache(registry=registry)
        advisor = MetricsAdvisor(
            AdvisorConfig(node_name="bench"), host, cache, FakeStates(pods=infos), EventBus(), registry
        )
        ticks = TickLog()
        assert advisor.metrics is not None and advisor.exposition is not None
        advisor.metrics.on_tick = ticks.hook(advisor.metrics.on_tick)  # type: ignore[method-assign,assignment]
        http = ProcessHTTPServer("127.0.0.1", 0, registry)
        http.route("/metrics", advisor.exposition.route)
        http.route("/metrics-on-demand", lambda _q: (200, CONTENT_TYPE_LATEST, generate_latest(registry)))
        http.start()
        advisor.start(stop, sup)
        yield Node(advisor, registry, http, ticks)
    finally:
        stop.set()
        if advisor is not None:
            advisor.shutdown()
        sup.join(time.monotonic() + 10.0)
        if http is not None:
            http.shutdown()
        kp.cleanup()


def scrapers(url: str, threads: int, rate: float, seconds: float) -> ScrapeResult:
    """``threads`` scrapers in another process for ``seconds``, each at most ``rate`` requests/s."""
    out = subprocess.run(
        [sys.executable, "-c", SCRAPER, url, str(threads), str(rate), str(seconds)],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=True,
    )
    got = json.loads(out.stdout)
    return ScrapeResult([float(x) for x in got["latencies"]], int(got["errors"]))


def sequential_ms(url: str, n: int, gzip: bool) -> float:
    script = (
        "import sys, time, urllib.request\n"
        "url, n, gz = sys.argv[1], int(sys.argv[2]), sys.argv[3] == '1'\n"
        "h = {'Accept-Encoding': 'gzip'} if gz else {}\n"
        "out = []\n"
        "for _ in range(n):\n"
        "    t0 = time.perf_counter()\n"
        "    with urllib.request.urlopen(urllib.request.Request(url, headers=h), timeout=10) as r:\n"
        "        r.read()\n"
        "    out.append((time.perf_counter() - t0) * 1000)\n"
        "print(sorted(out)[len(out) // 2])\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", script, url, str(n), "1" if gzip else "0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return float(res.stdout)


def timed_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def skip(why: str) -> int:
    print(json.dumps({"bench": NAME, "skipped": why}))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="8 s phases (under 50 s in all)")
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--scrapers", type=int, default=20)
    ap.add_argument("--rate", type=float, default=10.0, help="requests/s per scraper at most (0: unpaced)")
    ap.add_argument("--seconds", type=float, default=None, help="per phase (default 60, --quick 10)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still remove the cgroups
    if os.geteuid() != 0:
        return skip("needs root to create cgroups")
    if detect_mode(HostPaths()) is not CgroupMode.V1:
        return skip("needs the cgroup v1 cpu, cpuacct, cpuset and memory controllers")
    seconds = args.seconds or (8.0 if args.quick else 60.0)
    seq = 20 if args.quick else 50
    print(f"building {args.pods} pods ...", file=sys.stderr)
    with node(args.pods) as n:
        ex = n.advisor.exposition
        assert ex is not None
        ex.payload()  # a first scrape: the exposition renders ahead only while it is scraped
        deadline = time.monotonic() + 30
        while ex.renders < 2 and time.monotonic() < deadline:  # two sweeps: every rate has a baseline
            time.sleep(0.1)
        gc.collect()
        payload = ex.payload()
        render_ms = timed_ms(ex.render, 10)
        latest_ms = timed_ms(lambda: generate_latest(n.registry), 10)
        seq_ms = {
            "agent": sequential_ms(n.url("/metrics"), seq, False),
            "agent_gzip": sequential_ms(n.url("/metrics"), seq, True),
            "on_demand": sequential_ms(n.url("/metrics-on-demand"), seq, False),
            "on_demand_gzip": sequential_ms(n.url("/metrics-on-demand"), seq, True),
        }
        print(
            f"sequential scrape ms: {seq_ms}; render {render_ms:.1f} ms, generate_latest {latest_ms:.1f} ms",
            file=sys.stderr,
        )
        phases: dict[str, Phase] = {}
        for name, path in (("idle", None), ("agent", "/metrics"), ("on_demand", "/metrics-on-demand")):
            t0, c0 = time.monotonic(), cpu_seconds()
            res = scrapers(n.url(path), args.scrapers, args.rate, seconds) if path else None
            if res is None:
                time.sleep(seconds)
            t1, c1 = time.monotonic(), cpu_seconds()
            phases[name] = ph = Phase(
                cpu_s=c1 - c0,
                wall=t1 - t0,
                scrape_ms=[x * 1000 for x in res.latencies] if res else [],
                errors=res.errors if res else 0,
                fast_late=n.ticks.lateness_ms(FAST, t0, t1),
                pods_late=n.ticks.lateness_ms(PODS, t0, t1),
            )
            print(f"{name}: {ph.describe()}", file=sys.stderr)
        renders = ex.renders
    idle = phases["idle"]
    agent, floor = phases["agent"], phases["on_demand"]
    figures: dict[str, object] = {
        "bench": NAME,
        "pods": args.pods,
        "scrapers": args.scrapers,
        "phase_s": seconds,
        "payload_kib": round(len(payload.body) / 1024, 1),
        "gzip_kib": round(len(payload.gzip()) / 1024, 1),
        "render_ms": round(render_ms, 2),
        "generate_latest_ms": round(latest_ms, 2),
        "scrape_ms": round(seq_ms["agent"], 2),
        "scrape_gzip_ms": round(seq_ms["agent_gzip"], 2),
        "on_demand_scrape_ms": round(seq_ms["on_demand"], 2),
        "on_demand_scrape_gzip_ms": round(seq_ms["on_demand_gzip"], 2),
        "requests_agent": len(agent.scrape_ms),
        "requests_on_demand": len(floor.scrape_ms),
        "errors": agent.errors + floor.errors,
        "cpu_ms_per_scrape_agent": agent.cpu_ms_per_scrape(idle),
        "cpu_ms_per_scrape_on_demand": floor.cpu_ms_per_scrape(idle),
    }
    for label, ph in (("idle", idle), ("scraped", agent), ("on_demand", floor)):
        figures[f"agent_cpu_pct_core_{label}"] = round(ph.cpu_s / ph.wall * 100, 2)
    for label, ph in (("idle", idle), ("scraped", agent), ("on_demand", floor)):
        figures[f"fast_late_p99_ms_{label}"] = round(pct(ph.fast_late, 0.99), 2)
        figures[f"fast_late_max_ms_{label}"] = round(max(ph.fast_late, default=0.0), 2)
        figures[f"pods_late_p99_ms_{label}"] = round(pct(ph.pods_late, 0.99), 2)
    figures["renders"] = renders
    figures["ratio"] = round(seq_ms["agent"] / seq_ms["on_demand"], 3)
    print(json.dumps(figures))
    return 0


@dataclass
class ScrapeResult:
    latencies: list[float]
    errors: int


@dataclass
class Phase:
    """One phase's agent CPU, scrape wall times and sampling lateness (ms)."""

    cpu_s: float
    wall: float
    scrape_ms: list[float]
    errors: int
    fast_late: list[float]
    pods_late: list[float]

    def cpu_ms_per_scrape(self, idle: Phase) -> float:
        """Agent CPU above the idle phase's rate, per served scrape."""
        extra = self.cpu_s - idle.cpu_s / idle.wall * self.wall
        return round(extra / max(len(self.scrape_ms), 1) * 1000, 2)

    def describe(self) -> str:
        return (
            f"{len(self.scrape_ms)} scrapes ({self.errors} errors) wall ms {spread(self.scrape_ms)}; "
            f"agent {self.cpu_s / self.wall * 100:.1f}% of a core; lateness ms fast {spread(self.fast_late)}"
            f" pods {spread(self.pods_late)}"
        )


def late_pct(xs: list[float]) -> float:
    return round(sum(1 for x in xs if x > 10.0) / len(xs) * 100, 2) if xs else 0.0


if __name__ == "__main__":
    sys.exit(main())
