"""The agent's idle cost at 4 pods, beside node_exporter on the same machine in the same run.

Four idle pods (sleeping processes) in real cgroups under a unique ``koordlet-e2e-<random>`` parent, the
real agent as shipped (``koordlet run --standalone``, a NodeSLO with ``resourceUsedThresholdWithBE``
on, as on a colocation node), and ``prometheus-node-exporter`` with its default collectors when it is
installed. Both are scraped every 15 s (Prometheus' default interval, gzip) from the start, and the bench
reads their CPU and RSS over ``--seconds`` after two scrapes (a 30 s warm-up). Two scenarios run one after
the other: two of the pods BE (labelled pods of the besteffort tier, as Koordinator's batch pods) and
none BE. Whether the fast sampler ran is read from the agent's own tick counter
(``koordlet_collect_duration_seconds_count`` of ``FastSampler``): idle BE pods have nothing for it to
take back, so it stays disarmed.

Prints one JSON object: the agent's CPU (% of one core) and RSS per scenario, node_exporter's (absent
when the tool is not installed), and ``ratio`` = agent CPU with BE pods / node_exporter CPU. Everything
created is removed.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil

from koordlet.api import KubeQOSClass
from koordlet.system.cgroups import CgroupMode, detect_mode
from koordlet.system.paths import HostPaths
from koordlet.testing.agent import Agent, free_port
from koordlet.testing.cgroups import RealKubepods

NAME = "idle"
SCRAPE_EVERY = 15.0
WARMUP_SCRAPES = 2
"""Scrapes before the window opens (30 s: the agent has learnt the period and settled)."""
NODE_EXPORTER = "prometheus-node-exporter"
SLEEPER = "import time; time.sleep(86400)"
FAST_TICKS = re.compile(rb'^koordlet_collect_duration_seconds_count\{collector="FastSampler"\} (\S+)$', re.M)


def skip(why: str) -> int:
    print(json.dumps({"bench": NAME, "skipped": why}))
    return 0


def scrape(url: str) -> bytes:
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=10) as r:
        body = r.read()
        return gzip.decompress(body) if r.headers.get("Content-Encoding") == "gzip" else body


@contextlib.contextmanager
def node_exporter() -> Iterator[tuple[psutil.Process, str] | None]:
    """node_exporter on a free loopback port (``None`` when not installed)."""
    tool = shutil.which(NODE_EXPORTER)
    if tool is None:
        yield None
        return
    port = free_port()
    addr = f"127.0.0.1:{port}"
    proc = subprocess.Popen(
        [tool, f"--web.listen-address={addr}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"{NODE_EXPORTER} did not start")
            time.sleep(0.1)
        yield psutil.Process(proc.pid), f"http://{addr}/metrics"
    finally:
        proc.terminate()
        proc.wait(10)


def node_slo(tmp: Path) -> Path:
    path = tmp / "nodeslo.json"
    spec = {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 65}}
    path.write_text(
        json.dumps({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "spec": spec})
    )
    return path


def cpu_seconds(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def fast_ticks(body: bytes) -> float:
    m = FAST_TICKS.search(body)
    return float(m.group(1)) if m else 0.0


def scenario(be_pods: int, seconds: float, exporter: tuple[psutil.Process, str] | None) -> dict[str, float]:
    kp = RealKubepods()
    tmp = Path(tempfile.mkdtemp(prefix="koordlet-idle-"))
    agent: Agent | None = None
    try:
        for i in range(4):
            pod = kp.add_pod(KubeQOSClass.BESTEFFORT if i < be_pods else KubeQOSClass.BURSTABLE)
            kp.spawn(kp.add_container(pod), SLEEPER)
        agent = Agent(tmp, f"--cgroup-root=/{kp.parent}", f"--node-slo-file={node_slo(tmp)}")
        agent.wait_ready()
        me = psutil.Process(agent.proc.pid)
        targets = [(me, agent.base + "/metrics")] + ([exporter] if exporter else [])
        # Each target once per period from the start, as a running Prometheus would (the agent learns
        # the scrape period from the gaps between scrapes, and renders ahead of the next one); the
        # window opens after the warm-up scrapes, so it sees the steady state.
        start = time.monotonic()
        ticks: list[float] = []
        cpu0: list[float] = []
        t0 = 0.0
        for k in itertools.count():
            if cpu0 and time.monotonic() >= t0 + seconds:
                break
            for _p, url in targets:
                body = scrape(url)
                if url.startswith(agent.base):
                    ticks.append(fast_ticks(body))
            if k == WARMUP_SCRAPES:
                cpu0 = [cpu_seconds(p) for p, _ in targets]
                t0 = time.monotonic()
                ticks = ticks[-1:]
            nxt = start + (k + 1) * SCRAPE_EVERY
            end = t0 + seconds if cpu0 else nxt
            time.sleep(max(min(nxt, end) - time.monotonic(), 0.0))
        dt = time.monotonic() - t0
        cpu = [(cpu_seconds(p) - c) / dt * 100 for (p, _), c in zip(targets, cpu0, strict=True)]
        out = {
            "agent_cpu_pct": round(cpu[0], 3),
            "agent_rss_mib": round(me.memory_info().rss / 2**20, 1),
            "fast_samples": ticks[-1] - ticks[0],
        }
        if exporter is not None:
            out["node_exporter_cpu_pct"] = round(cpu[1], 3)
            out["node_exporter_rss_mib"] = round(exporter[0].memory_info().rss / 2**20, 1)
        status = agent.stop()
        agent = None
        if status != 0:
            raise SystemExit(f"agent exited {status}")
        return out
    finally:
        if agent is not None:
            agent.stop()
        kp.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="45 s per scenario")
    ap.add_argument("--seconds", type=float, default=None, help="per scenario (default 180, --quick 45)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still stop the processes, remove the cgroups
    if os.geteuid() != 0:
        return skip("needs root to create cgroups")
    if detect_mode(HostPaths()) is not CgroupMode.V1:
        return skip("needs the cgroup v1 cpu, cpuacct, cpuset and memory controllers")
    seconds = args.seconds or (45.0 if args.quick else 180.0)
    with node_exporter() as exporter:
        with_be = scenario(2, seconds, exporter)
        without_be = scenario(0, seconds, exporter)
    figures: dict[str, object] = {"bench": NAME, "pods": 4, "seconds": seconds, "cpus": os.cpu_count()}
    figures |= {f"with_be_{k}": v for k, v in with_be.items()}
    figures |= {f"without_be_{k}": v for k, v in without_be.items()}
    if exporter is None:
        figures["node_exporter"] = f"{NODE_EXPORTER} not installed"
    else:
        figures["ratio"] = round(with_be["agent_cpu_pct"] / max(with_be["node_exporter_cpu_pct"], 1e-9), 2)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
