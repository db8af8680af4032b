"""kube-scheduler's own benchmark, scheduler_perf (``k8s.io/kubernetes/test/integration/scheduler_perf``),
run on this machine: the anchor the koord-scheduler figures of ``bench/against_kube.py`` are read against.

The test packages are built from the Go module in ``bench/kubeperf/`` (it requires the Kubernetes release
the real-cluster binaries are built from; nothing of Kubernetes is copied here) into the binaries' cache,
and each workload runs as upstream's CI runs it (``-bench=BenchmarkPerfScheduling/<case>/<workload>
-benchtime=1ns``, in its package directory in the module cache, so its configuration and templates are
upstream's): an in-process kube-apiserver and kube-scheduler, with the built etcd as its child.

Printed per workload: ``SchedulingThroughput`` (pods/s over the measured pods, sampled each second:
average, p50, p90, p99), the scheduling attempt duration p50/p99, the wall time (set-up included) and the
test process's peak RSS (apiserver, scheduler and the test client together; etcd apart). Beside each
5000-node figure: the same case's 500-node figure of this run (how it scales here), and upstream's CI
minimum for the case's largest workload where it has one (set on a larger machine).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.realcluster import binaries

NAME = "scheduler_perf"
MODULE = Path(__file__).resolve().parent / "kubeperf"
PKG = "k8s.io/kubernetes/test/integration/scheduler_perf"


@dataclass(frozen=True)
class Workload:
    topic: str
    """The test package under scheduler_perf (its performance-config.yaml holds the case)."""
    case: str
    name: str
    nodes: int
    init_pods: int
    measure_pods: int
    ci_minimum: float | None = None
    """Upstream's CI threshold for the case's largest workload (not this one), pods/s."""
    anchor: str = ""
    """Another workload's label whose figure of the same run is printed beside this one's."""

    @property
    def label(self) -> str:
        return f"{self.case}/{self.name}"


# The cases named in upstream's performance-config.yaml of v1.34 (params copied as numbers to print them).
WORKLOADS = (
    Workload("misc", "SchedulingBasic", "500Nodes", 500, 500, 1000),
    Workload("misc", "SchedulingBasic", "5000Nodes", 5000, 1000, 1000, 270),
    Workload("affinity", "SchedulingPodAntiAffinity", "500Nodes", 500, 100, 400),
    Workload("affinity", "SchedulingPodAntiAffinity", "5000Nodes", 5000, 1000, 1000, 60),
    Workload("topology_spreading", "TopologySpreading", "500Nodes", 500, 1000, 1000),
    Workload("topology_spreading", "TopologySpreading", "5000Nodes", 5000, 5000, 2000, 85),
    Workload("affinity", "SchedulingNodeAffinity", "500Nodes", 500, 500, 1000),
    Workload("affinity", "SchedulingNodeAffinity", "5000Nodes", 5000, 5000, 1000, 220),
    # Each measured pod preempts three of a node's four: kube-scheduler's own cost of a preemption
    # (dry run over the candidates, then the bind after the victims went) beside SchedulingBasic's.
    Workload("misc", "PreemptionBasic", "1000Nodes", 1000, 4000, 1000, anchor="SchedulingBasic/500Nodes"),
)
QUICK = ("SchedulingBasic/500Nodes",)


def go() -> str:
    path = shutil.which("go")
    if path is None:
        raise binaries.BuildError("scheduler_perf is built from Go modules: install Go 1.24 or newer")
    return path


def test_binaries(say: Any = print) -> Path:
    """The three scheduler_perf test binaries, built into the cache unless there (keyed as the cluster's
    binaries are, by the module's go.mod/go.sum). Built with ``-trimpath`` so the Go build cache the
    cluster's binaries filled is reused (a warm build is about a minute, a cold one much longer)."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((MODULE / name).read_bytes())
    version = binaries.kube_version(MODULE)
    out = binaries.cache_root() / f"scheduler_perf-{version}-{digest.hexdigest()[:12]}"
    topics = sorted({w.topic for w in WORKLOADS})
    if all(os.access(out / f"{t}.test", os.X_OK) for t in topics):
        return out
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    say(f"building scheduler_perf {version} ({', '.join(topics)}) into {out}")
    began = time.monotonic()
    done = subprocess.run(
        [go(), "test", "-c", "-trimpath", "-o", f"{partial}/", *(f"{PKG}/{t}" for t in topics)],
        cwd=MODULE,
        env={**os.environ, "GOFLAGS": "-mod=mod", "CGO_ENABLED": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise binaries.BuildError(f"go test -c failed:\n{(done.stdout + done.stderr)[-4000:]}")
    out.mkdir(parents=True, exist_ok=True)
    for t in topics:
        (partial / f"{t}.test").replace(out / f"{t}.test")
    shutil.rmtree(partial, ignore_errors=True)
    say(f"built in {time.monotonic() - began:.0f}s")
    return out


def package_dirs() -> dict[str, Path]:
    """Each test package's directory in the module cache (downloaded if it is missing)."""
    topics = sorted({w.topic for w in WORKLOADS})
    done = subprocess.run(
        [go(), "list", "-f", "{{.ImportPath}} {{.Dir}}", *(f"{PKG}/{t}" for t in topics)],
        cwd=MODULE,
        env={**os.environ, "GOFLAGS": "-mod=mod"},
        capture_output=True,
        text=True,
        check=True,
    )
    return {line.split()[0].rsplit("/", 1)[1]: Path(line.split()[1]) for line in done.stdout.splitlines()}


def closed_port() -> int:
    """A loopback port nothing listens on: the integration framework reuses an etcd it finds at
    ``KUBE_INTEGRATION_ETCD_URL`` (by default 127.0.0.1:2379, which may be someone else's), and starts its
    own when nothing answers there."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def hwm_kib(pid: int) -> int:
    """The process's peak resident set so far (``VmHWM``), KiB; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_one(w: Workload, bins: Path, dirs: dict[str, Path], etcd_dir: Path, timeout: float) -> dict[str, Any]:
    """One workload in a test process of its own; its figures from the JSON it writes."""
    with tempfile.TemporaryDirectory(prefix="scheduler-perf-") as tmp:
        out = Path(tmp)
        env = {
            **os.environ,
            "PATH": f"{etcd_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "KUBE_INTEGRATION_ETCD_URL": f"http://127.0.0.1:{closed_port()}",
            # Logs go to <ARTIFACTS>/<test>.log (kept only when it fails) instead of the output.
            "ARTIFACTS": str(out),
            "TMPDIR": str(out),  # etcd's data directory
            # The test apiserver finds its fixture certificates from its own source path, which -trimpath
            # made relative; this is the way its code takes for such a build (it joins these two).
            "TEST_SRCDIR": str(dirs[w.topic].parents[len(PKG.split("/"))]),
            "TEST_WORKSPACE": ".",
        }
        argv = [
            str(bins / f"{w.topic}.test"),
            "-test.run=^$",
            f"-test.bench=^BenchmarkPerfScheduling$/^{w.case}$/^{w.name}$",
            "-test.benchtime=1ns",
            f"-test.timeout={int(timeout)}s",
            f"-data-items-dir={out}",
            "-perf-scheduling-label-filter=performance",
        ]
        began = time.monotonic()
        log = out / "output.txt"
        with log.open("w") as sink:
            proc = subprocess.Popen(
                argv,
                cwd=dirs[w.topic],
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        peak = 0
        try:
            while proc.poll() is None:
                peak = max(peak, hwm_kib(proc.pid))
                if time.monotonic() - began > timeout + 60:
                    raise TimeoutError(f"{w.label}: still running after {timeout + 60:.0f}s")
                time.sleep(0.5)
        except BaseException:  # a timeout or Ctrl-C: its whole group (the test and its etcd)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        wall = time.monotonic() - began
        files = sorted(out.glob("BenchmarkPerfScheduling_benchmark_*.json"))
        if proc.returncode != 0 or not files:
            logs = "".join(p.read_text(errors="replace")[-3000:] for p in out.glob("*.log"))
            raise RuntimeError(f"{w.label}: exit {proc.returncode}\n{log.read_text()[-3000:]}\n{logs}")
        items = json.loads(files[-1].read_text())["dataItems"]
    res: dict[str, Any] = {"wall_s": round(wall, 1), "peak_rss_mib": round(peak / 1024)}
    for item in items:
        metric = item["labels"].get("Metric")
        if metric == "SchedulingThroughput":
            d = item["data"]
            res.update(
                {
                    "pods_per_s": round(d["Average"], 1),
                    "p50": round(d["Perc50"], 1),
                    "p90": round(d["Perc90"], 1),
                    "p99": round(d["Perc99"], 1),
                }
            )
        elif metric == "scheduler_scheduling_attempt_duration_seconds" and (
            item["labels"].get("result") == "scheduled"
        ):
            res["attempt_p50_ms"] = round(item["data"]["Perc50"], 2)
            res["attempt_p99_ms"] = round(item["data"]["Perc99"], 2)
    if "pods_per_s" not in res:
        # Every measured pod was bound before the collector's first 1-second sample: a lower bound.
        res.update({"pods_per_s": float(w.measure_pods), "p50": None, "p90": None, "p99": None})
        res["within_first_sample"] = True
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    parser.add_argument(
        "--only", default="", help="comma-separated case/workload names (e.g. SchedulingBasic/500Nodes)"
    )
    parser.add_argument("--timeout", type=float, default=1800, help="per workload, seconds")
    parser.add_argument("--runs", type=int, default=1, help="runs per workload; the median is printed")
    opts = parser.parse_args()
    chosen = [w for w in WORKLOADS if not opts.quick or w.label in QUICK]
    if opts.only:
        wanted = set(opts.only.split(","))
        chosen = [w for w in WORKLOADS if w.label in wanted]
    try:
        etcd = binaries.build(say=print).path("etcd")
        bins = test_binaries()
        dirs = package_dirs()
    except binaries.BuildError as err:
        print(f"scheduler_perf: skipped: {err}")
        print(json.dumps({"bench": NAME, "skipped": str(err)}))
        return
    result: dict[str, Any] = {"bench": NAME, "loadavg_start": os.getloadavg()[0]}
    by_label: dict[str, dict[str, Any]] = {}
    for w in chosen:
        runs = []
        for _ in range(max(opts.runs, 1)):
            load = os.getloadavg()[0]
            runs.append({**run_one(w, bins, dirs, etcd.parent, opts.timeout), "loadavg": round(load, 2)})
        runs.sort(key=lambda r: r["pods_per_s"])
        res = {**runs[len(runs) // 2], "all_pods_per_s": [r["pods_per_s"] for r in runs]}
        by_label[w.label] = res
        small = by_label.get(f"{w.case}/500Nodes") if w.nodes != 500 else None
        beside = []
        if small is not None:
            beside.append(f"500 nodes this run: {small['pods_per_s']} pods/s")
        anchor = by_label.get(w.anchor)
        if anchor is not None:
            beside.append(f"{w.anchor} this run: {anchor['pods_per_s']} pods/s")
        if w.ci_minimum is not None:
            beside.append(f"upstream CI minimum of the case's largest workload: {w.ci_minimum:g}")
        rate = (
            f">= {res['pods_per_s']:g} pods/s (every measured pod bound within the first 1-s sample)"
            if res.get("within_first_sample")
            else f"{res['pods_per_s']} pods/s (p50 {res['p50']} p90 {res['p90']} p99 {res['p99']})"
        )
        spread = f", runs {res['all_pods_per_s']}" if len(runs) > 1 else ""
        print(
            f"{w.label} ({w.nodes} nodes, {w.init_pods} init pods, {w.measure_pods} measured): {rate}"
            f"{spread}, attempt p50 {res.get('attempt_p50_ms')} ms p99 {res.get('attempt_p99_ms')} ms, "
            f"wall {res['wall_s']} s, peak RSS {res['peak_rss_mib']} MiB, load {res['loadavg']}"
            + (f"  [{'; '.join(beside)}]" if beside else ""),
            flush=True,
        )
        for k, v in res.items():
            result[f"{w.case}_{w.name}_{k}"] = v
    result["loadavg_end"] = os.getloadavg()[0]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
