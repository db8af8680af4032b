"""The agent beside the kubelet on a real node: 100 real pods under the real kubelet, and in one run what
each costs.

The project's real single-node cluster (``tests/realcluster``: etcd, kube-apiserver, containerd, the
kubelet and our stack as host processes, as its pods would run them) is brought up under the machine's
real-cluster lock (waiting for another holder up to ``--wait``) and always brought down at the end. The
bench creates ``--pods`` busybox pods with tiny requests, waits until they run, lets the node settle,
then measures:

- over ``--seconds`` (the window): the agent's CPU (% of one core) and RSS, the kubelet's, and
  containerd's (which answers the kubelet's CRI calls), as psutil reads them; the
  agent is scraped every 15 s (Prometheus' default) with a token of the metrics-reader ServiceAccount of
  ``deploy/``, the kubelet is not scraped: its window is its idle baseline, with cAdvisor inside it
  sampling the same cgroups on its housekeeping;
- the agent's pod sweep per pod per sample: its own ``koordlet_collect_cpu_seconds_total`` of
  ``PodResourceCollector`` (its thread's clock) over the sweeps of the window and the pods;
- cAdvisor's own sampling, where the ``go`` tool is: a ``--profile`` seconds CPU profile of the kubelet
  (``/debug/pprof/profile``) read with ``go tool pprof``, the CPU under cAdvisor's per-container
  housekeeping, per pod per housekeeping interval;
- cAdvisor's scrape: ``--scrapes`` back-to-back GETs of the kubelet's ``/metrics/cadvisor``, the kubelet's
  CPU over them minus its baseline rate (CPU per scrape), their wall time and bytes.

Prints a table (agent beside kubelet, with the ratio) and one JSON line, and says where the agent costs
more than the kubelet when it does.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import yaml

NAME = "beside_kubelet"
NS = "beside-kubelet"
SCRAPE_EVERY = 15.0
SETTLE = 30.0
"""After the last pod runs: the kubelet's status updates and the agent's discovery of the pods quiet down."""
HOUSEKEEPING = 10.0
"""The kubelet's cAdvisor housekeeping interval (its default): how often cAdvisor samples a container."""
SWEEP_CPU = re.compile(
    rb'^koordlet_collect_cpu_seconds_total\{collector="PodResourceCollector"\} (\S+)$', re.M
)
SWEEPS = re.compile(
    rb'^koordlet_collect_duration_seconds_count\{collector="PodResourceCollector"\} (\S+)$', re.M
)


# -- arithmetic (pure, unit-tested)


def pct_of_core(cpu0: float, cpu1: float, seconds: float) -> float:
    """CPU seconds between two readings, as % of one core over ``seconds`` of wall time."""
    if seconds <= 0:
        raise ValueError("the window must be longer than zero")
    return (cpu1 - cpu0) / seconds * 100.0


def per_event_cpu(cpu: float, seconds: float, baseline_pct: float, events: int) -> float:
    """CPU seconds each of ``events`` cost: the ``cpu`` seconds over ``seconds`` less what the process
    spends at its baseline rate (% of a core) in as long, never below zero."""
    extra = cpu - baseline_pct / 100.0 * seconds
    return max(extra, 0.0) / events


def counter(pattern: re.Pattern[bytes], body: bytes) -> float:
    m = pattern.search(body)
    if m is None:
        raise LookupError(f"no {pattern.pattern[:60]!r} in the agent's /metrics")
    return float(m.group(1))


_DURATION = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "mins": 60.0, "hrs": 3600.0}
_TOTAL = re.compile(r"Total samples = ([\d.]+)(\D+?)\b")
_SHOWN = re.compile(r"Showing nodes accounting for ([\d.]+)(\D*?)[, ]")


def pprof_seconds(top: str) -> tuple[float, float]:
    """(CPU seconds of the focused samples, of all samples) from ``go tool pprof -top -focus=...
    -nodefraction=0``: every node shown, so the nodes' sum is the focused samples' total."""
    total = _TOTAL.search(top)
    if total is None:
        raise ValueError("no 'Total samples' in the pprof output")
    shown = _SHOWN.search(top)
    focused = 0.0
    if shown is not None:
        focused = float(shown.group(1)) * _DURATION.get(shown.group(2) or "s", 0.0)
    return focused, float(total.group(1)) * _DURATION[total.group(2)]


@dataclass(frozen=True)
class Reading:
    cpu: float
    """user + system CPU seconds"""
    rss_mib: float


def read_proc(pid: int) -> Reading:
    proc = psutil.Process(pid)
    with proc.oneshot():
        times, rss = proc.cpu_times(), proc.memory_info().rss
    return Reading(times.user + times.system, rss / 2**20)


# -- the machine


def skip(why: str) -> int:
    from bench.workloads.realsched import skipped

    skipped(NAME, why)
    return 0


def pod(i: int) -> dict[str, Any]:
    from tests.realcluster.images import BUSYBOX

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"sleeper-{i:03d}", "namespace": NS, "labels": {"app": "sleeper"}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": BUSYBOX,
                    "imagePullPolicy": "Never",
                    "command": ["sleep", "86400"],
                    "resources": {"requests": {"cpu": "1m", "memory": "4Mi"}},
                }
            ],
        },
    }


def running(kubectl: Callable[..., str]) -> int:
    items = json.loads(kubectl("get", "pods", "-n", NS, "-o", "json"))["items"]
    return sum(1 for p in items if p.get("status", {}).get("phase") == "Running")


def scraper_token(c: Any) -> str:
    """A token of ``deploy/``'s metrics-reader ServiceAccount (the objects the Prometheus Operator's
    PodMonitor aside): the agent reviews every caller of /metrics with the API server."""
    from tests.realcluster import stack

    objs = [d for d in stack.documents(stack.DEPLOY / "daemonset" / "prometheus-scrape.yaml")]
    objs = [d for d in objs if d.get("kind") != "PodMonitor"]
    c.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(objs))
    sa = next(d for d in objs if d.get("kind") == "ServiceAccount")
    return stack.service_account_token(c.admin_kubeconfig, sa["metadata"]["name"])


def agent_pid(supervisor: int) -> int:
    """The agent under its supervisor (the kubelet's part for a container run as a host process)."""
    kids = psutil.Process(supervisor).children()
    if len(kids) != 1:
        raise RuntimeError(f"the koordlet supervisor has {len(kids)} children, not one")
    return int(kids[0].pid)


def get(url: str, *, token: str = "", tls: tuple[Path, Path, Path] | None = None) -> tuple[bytes, float]:
    """The body and its wall time."""
    import ssl
    import urllib.request

    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    ctx = None
    if tls is not None:
        ca, cert, key = tls
        ctx = ssl.create_default_context(cafile=str(ca))
        ctx.load_cert_chain(str(cert), str(key))
    began = time.monotonic()
    with urllib.request.urlopen(req, timeout=60, context=ctx) as r:
        body: bytes = r.read()
    return body, time.monotonic() - began


def measure(c: Any, args: argparse.Namespace, say: Callable[[str], None]) -> dict[str, Any]:
    from tests.realcluster.procs import last_port, wait_until

    say(f"creating {args.pods} pods in namespace {NS}")
    c.kubectl("create", "namespace", NS)
    c.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all([pod(i) for i in range(args.pods)]), timeout=120)
    began = time.monotonic()
    wait_until(
        f"{args.pods} pods Running",
        lambda: running(c.kubectl) >= args.pods,
        args.pods_timeout,
        watch=[c.procs["kubelet"]],
        every=2.0,
    )
    say(f"{args.pods} pods Running after {time.monotonic() - began:.0f} s; settling {args.settle:.0f} s")
    time.sleep(args.settle)

    token = scraper_token(c)
    sup = c.procs["koordlet"]
    agent = agent_pid(sup.pid)
    agent_url = f"http://127.0.0.1:{last_port(sup)}/metrics"
    pids = {"agent": agent, "kubelet": c.procs["kubelet"].pid, "containerd": c.procs["containerd"].pid}
    tls = (c.pki / "ca.crt", c.pki / "admin.crt", c.pki / "admin.key")
    assert c.ports is not None
    cadvisor_url = f"https://{c.net.api_host}:{c.ports.kubelet}/metrics/cadvisor"

    # The window: the agent scraped as Prometheus would, the kubelet left alone (its baseline).
    body, _ = get(agent_url, token=token)
    sweep0, cpu0 = counter(SWEEPS, body), counter(SWEEP_CPU, body)
    first = {k: read_proc(p) for k, p in pids.items()}
    t0 = time.monotonic()
    agent_scrapes: list[tuple[int, float]] = []
    while (left := t0 + args.seconds - time.monotonic()) > 0:
        time.sleep(min(SCRAPE_EVERY, left))
        if time.monotonic() < t0 + args.seconds - 1:
            body, took = get(agent_url, token=token)
            agent_scrapes.append((len(body), took))
    last = {k: read_proc(p) for k, p in pids.items()}
    dt = time.monotonic() - t0
    body, _ = get(agent_url, token=token)
    sweeps = counter(SWEEPS, body) - sweep0
    sweep_cpu = counter(SWEEP_CPU, body) - cpu0
    cpu = {k: pct_of_core(first[k].cpu, last[k].cpu, dt) for k in pids}

    profiled = profile_kubelet(c, tls, args.profile, args.pods, say) if args.profile > 0 else {}

    # cAdvisor's scrape: back to back, the kubelet's CPU over them less its baseline rate.
    say(f"{args.scrapes} scrapes of the kubelet's /metrics/cadvisor")
    get(cadvisor_url, tls=tls)  # the connection's first handshake and any lazy set-up out of the count
    k0 = read_proc(pids["kubelet"]).cpu
    s0 = time.monotonic()
    scrapes = [get(cadvisor_url, tls=tls) for _ in range(args.scrapes)]
    s_dt = time.monotonic() - s0
    k1 = read_proc(pids["kubelet"]).cpu
    per_scrape = per_event_cpu(k1 - k0, s_dt, cpu["kubelet"], args.scrapes)
    series = sum(1 for line in scrapes[-1][0].splitlines() if line and not line.startswith(b"#"))

    pods = args.pods
    return {
        "pods": pods,
        "seconds": round(dt, 1),
        "cpus": os.cpu_count(),
        "load1": round(os.getloadavg()[0], 2),
        "agent_cpu_pct": round(cpu["agent"], 3),
        "agent_rss_mib": round(last["agent"].rss_mib, 1),
        "kubelet_cpu_pct": round(cpu["kubelet"], 3),
        "kubelet_rss_mib": round(last["kubelet"].rss_mib, 1),
        "containerd_cpu_pct": round(cpu["containerd"], 3),
        "containerd_rss_mib": round(last["containerd"].rss_mib, 1),
        "cpu_ratio": round(cpu["agent"] / max(cpu["kubelet"], 1e-9), 2),
        "rss_ratio": round(last["agent"].rss_mib / max(last["kubelet"].rss_mib, 1e-9), 2),
        "agent_sweeps": int(sweeps),
        "agent_sweep_cpu_pct": round(sweep_cpu / dt * 100, 3),
        "agent_us_per_pod_sample": round(sweep_cpu / max(sweeps, 1) / pods * 1e6, 1),
        # the whole kubelet over one housekeeping interval: an upper bound of cAdvisor's per-pod sample
        "kubelet_whole_us_per_pod_housekeeping": round(cpu["kubelet"] / 100 * HOUSEKEEPING / pods * 1e6, 1),
        "agent_scrape_ms": round(statistics.median(t for _, t in agent_scrapes) * 1000, 1)
        if agent_scrapes
        else None,
        "agent_scrape_bytes": agent_scrapes[-1][0] if agent_scrapes else None,
        "cadvisor_scrapes": args.scrapes,
        "cadvisor_scrape_cpu_ms": round(per_scrape * 1000, 1),
        "cadvisor_us_per_pod_scrape": round(per_scrape / pods * 1e6, 1),
        "cadvisor_scrape_ms": round(statistics.median(t for _, t in scrapes) * 1000, 1),
        "cadvisor_scrape_bytes": len(scrapes[-1][0]),
        "cadvisor_series": series,
    } | profiled


HOUSEKEEPING_FOCUS = r"cadvisor/manager\.\(\*containerData\)\.housekeeping"
CADVISOR_FOCUS = r"github\.com/google/cadvisor/"


def profile_kubelet(
    c: Any, tls: tuple[Path, Path, Path], seconds: float, pods: int, say: Callable[[str], None]
) -> dict[str, float]:
    """A CPU profile of the kubelet (its ``/debug/pprof/profile``), read with ``go tool pprof``: the CPU of
    cAdvisor's housekeeping (its per-container sampling) and of cAdvisor as a whole. Empty without Go."""
    import shutil
    import subprocess

    go = shutil.which("go")
    if go is None:
        say("no go tool: the kubelet's profile (cAdvisor's own share) is not taken")
        return {}
    say(f"a {seconds:.0f} s CPU profile of the kubelet")
    url = f"https://{c.net.api_host}:{c.ports.kubelet}/debug/pprof/profile?seconds={seconds:.0f}"
    raw, took = get(url, tls=tls)
    path = c.state / "kubelet.pprof"
    path.write_bytes(raw)

    def focused(regex: str) -> tuple[float, float]:
        done = subprocess.run(
            [go, "tool", "pprof", "-top", "-nodefraction=0", f"-focus={regex}", str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return pprof_seconds(done.stdout + done.stderr)

    housekeeping, total = focused(HOUSEKEEPING_FOCUS)
    cadvisor, _ = focused(CADVISOR_FOCUS)
    return {
        "seconds_profiled": round(took, 1),
        "kubelet_profiled_pct": round(total / took * 100, 3),
        "housekeeping_pct": round(housekeeping / took * 100, 3),
        "cadvisor_pct": round(cadvisor / took * 100, 3),
        # One sample of each container every housekeeping interval (the dynamic housekeeping stretches an
        # unchanging container's up to 1.5x: then a sample costs that much more).
        "cadvisor_us_per_pod_sample": round(housekeeping / (took / HOUSEKEEPING) / pods * 1e6, 1),
    }


def report(f: dict[str, Any]) -> list[str]:
    """The table, and where the agent costs more than the kubelet (or that it does not)."""
    n = f["pods"]
    scrape_pct = f["cadvisor_scrape_cpu_ms"] / 1000 / SCRAPE_EVERY * 100
    lines = [
        f"{n} pods, {f['seconds']:.0f} s window, {f['cpus']} CPUs, load {f['load1']}",
        f"{'':34}{'agent':>12}{'kubelet':>12}{'ratio':>8}",
        f"{'CPU, % of a core':34}{f['agent_cpu_pct']:12.3f}{f['kubelet_cpu_pct']:12.3f}{f['cpu_ratio']:8.2f}",
        f"{'RSS, MiB':34}{f['agent_rss_mib']:12.1f}{f['kubelet_rss_mib']:12.1f}{f['rss_ratio']:8.2f}",
        f"{'whole process per pod, us CPU/s':34}{f['agent_cpu_pct'] * 1e4 / n:12.1f}"
        f"{f['kubelet_cpu_pct'] * 1e4 / n:12.1f}",
        f"{'per pod per sample, us CPU':34}{f['agent_us_per_pod_sample']:12.1f}"
        f"{f.get('cadvisor_us_per_pod_sample', f['kubelet_whole_us_per_pod_housekeeping']):12.1f}",
        "  (agent: its pod sweep's own clock, one sweep a second; kubelet: "
        + (
            f"cAdvisor's housekeeping in its profile, one sample every {HOUSEKEEPING:.0f} s)"
            if "cadvisor_us_per_pod_sample" in f
            else f"its whole CPU over one {HOUSEKEEPING:.0f} s housekeeping, an upper bound of cAdvisor's)"
        ),
        *(
            [
                f"cAdvisor's housekeeping (the kubelet's profile, {f['seconds_profiled']:.0f} s): "
                f"{f['housekeeping_pct']:.3f} % of a core, {f['cadvisor_us_per_pod_sample']:.1f} us a pod a "
                f"{HOUSEKEEPING:.0f} s sample; cAdvisor in all {f['cadvisor_pct']:.3f} % of the kubelet's "
                f"{f['kubelet_profiled_pct']:.3f} %"
            ]
            if "cadvisor_us_per_pod_sample" in f
            else []
        ),
        f"{'a scrape: ms wall':34}{f['agent_scrape_ms'] or 0:12.1f}{f['cadvisor_scrape_ms']:12.1f}",
        f"{'a scrape: bytes':34}{f['agent_scrape_bytes'] or 0:12d}{f['cadvisor_scrape_bytes']:12d}",
        f"cAdvisor scrape: {f['cadvisor_scrape_cpu_ms']:.1f} ms of the kubelet's CPU each "
        f"({f['cadvisor_us_per_pod_scrape']:.1f} us a pod, {f['cadvisor_series']} series); one every "
        f"{SCRAPE_EVERY:.0f} s would add {scrape_pct:.3f} % of a core to the kubelet's",
        f"containerd beside them (the kubelet's CRI calls): {f['containerd_cpu_pct']:.3f} % of a core, "
        f"{f['containerd_rss_mib']:.1f} MiB",
    ]
    more = []
    if f["agent_cpu_pct"] > f["kubelet_cpu_pct"]:
        more.append(
            f"CPU {f['cpu_ratio']:.2f}x the kubelet's; the agent's pod sweep alone is "
            f"{f['agent_sweep_cpu_pct']:.3f} % of a core (a sample a second, cAdvisor's every "
            f"{HOUSEKEEPING:.0f} s)"
        )
    if f["agent_rss_mib"] > f["kubelet_rss_mib"]:
        more.append(f"RSS {f['rss_ratio']:.2f}x the kubelet's")
    if more:
        lines.append("the agent costs MORE than the kubelet that runs the same pods: " + "; ".join(more))
    else:
        lines.append("the agent costs no more than the kubelet that runs the same pods (CPU and RSS)")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a 30 s window and 10 scrapes")
    ap.add_argument("--pods", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=None, help="the window (default 60, --quick 30)")
    ap.add_argument("--scrapes", type=int, default=None, help="cAdvisor scrapes (default 20, --quick 10)")
    ap.add_argument("--settle", type=float, default=SETTLE)
    ap.add_argument(
        "--profile",
        type=float,
        default=None,
        help="the kubelet's CPU profile, s (default 30, --quick 15; 0: none)",
    )
    ap.add_argument("--pods-timeout", type=float, default=600.0)
    ap.add_argument("--wait", type=float, default=1200.0, help="for another holder of the machine's cluster")
    args = ap.parse_args()
    args.seconds = args.seconds or (30.0 if args.quick else 60.0)
    args.scrapes = args.scrapes or (10 if args.quick else 20)
    if args.profile is None:
        args.profile = 15.0 if args.quick else 30.0
    from tests.realcluster.cluster import Cluster, ready, unmet
    from tests.realcluster.machinelock import machine_lock

    why = unmet()
    if why:
        return skip(why)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still bring the cluster down

    def say(text: str) -> None:
        print(f"{NAME}: {text}", flush=True)

    state = Path(tempfile.mkdtemp(prefix="koordlet-beside-kubelet-"))
    with machine_lock(args.wait, lambda: ready(state, say), say) as verdict:
        if verdict.busy:
            return skip(verdict.busy)
        c = Cluster(state)
        try:
            c.up(say=say)
            figures = measure(c, args, say)
        finally:
            left = c.down(say=say)
            for line in left:
                print(f"{NAME}: left behind: {line}", file=sys.stderr)
            if not left:
                shutil.rmtree(state, ignore_errors=True)
    print("\n".join(report(figures)))
    print(json.dumps({"bench": NAME} | figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
