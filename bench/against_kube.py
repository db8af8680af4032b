"""koord-scheduler beside kube-scheduler on one real kube-apiserver: the same hollow nodes and the same pods,
placed by each scheduler from a clean etcd, in one run.

For each node count (500, 1000 and 5000; ``--quick``: 100) and each scheduler:

- ``kube``: kube-scheduler (the built binary), default profile;
- ``kube-json``, ``kube-http1``: the same, its requests and answers in JSON (not protobuf), or over
  HTTP/1.1 (not HTTP/2), as koord-scheduler's client talks: what each costs kube-apiserver and the idle
  latency (not in the default set);
- ``koord``: koord-scheduler, default profile (kube-scheduler's default plugins);
- ``koord-profile``: koord-scheduler with Koordinator's shipped profile
  (``deploy/scheduler/koordinator-profile.yaml``: LoadAware, NodeNUMAResource, Reservation, Coscheduling,
  ElasticQuota, DeviceShare);
- ``extender``: kube-scheduler calling koord-scheduler-extender (``deploy/scheduler/extender.yaml``,
  LoadAwareScheduling; the extender binds);

a fresh control plane (etcd, kube-apiserver, kube-controller-manager; its node lifecycle controller off,
since hollow nodes send no heartbeats), Koordinator's CRDs, N Ready Node objects (scheduler_perf's node:
4 CPUs, 32 GiB, 110 pods, in three zones), a fresh NodeMetric per node, and P pending pods
(scheduler_perf's default pod: 100m CPU, 500Mi) made before the scheduler starts; the scheduler drains
that backlog; then pods arrive one every 100 ms on the idle scheduler. Every pod names
``default-scheduler``: each koord-scheduler profile is renamed so. Both schedulers get
``clientConnection.qps``/``burst`` 5000 (``--qps``/``--burst``).

Printed per run, each beside its ratio to kube-scheduler's figure at the same node count:

- ``pods/s``: backlog pods over the time from the first binding to the last;
- ``first bind``: seconds from the scheduler's start (process spawned) to its first binding;
- ``create->bound p50/p99``: of the paced pods on the idle scheduler, from kube-apiserver's own
  timestamps (its audit log: the pod's create, the binding's; microseconds, one clock); its p50 split at
  the binding's arrival: the scheduler's share (the watch, the cycle, the request sent) and the bind's;
- ``CPU s``: the scheduler's CPU from its start to the last binding; ``ms/pod``: its CPU per backlog pod
  during the drain; ``RSS``/``peak``: at the end of the drain (``/proc``); the extender's row counts
  kube-scheduler and the extender together;
- ``api ms/pod``: kube-apiserver's and etcd's CPU per pod during the drain (the rest of the 2 cores);
- spread: nodes left empty, the most pods on a node, and the histogram of pods per node.

Then, per scheduler but the extender (whose preemption is kube-scheduler's), on one node of a fresh
control plane: a pod preempts another and the victim goes for good once marked (as with a kubelet that
stops it at once): seconds from the victim gone to the preemptor's binding, both on the audit clock.
``--profile DIR`` runs koord-scheduler under cProfile (each thread's CPU time) and prints where it went;
``--trace DIR`` marks each stage of a pod's way through it (wall clock) and prints, for the paced pods,
where an idle pod's latency went beside the audit's create and binding.

Figures vary with what else runs on the machine; the load average is printed with each run.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from bench.workloads import profiled, traced
from bench.workloads.realsched import (
    NS,
    WORKLOADS,
    ZONE,
    Audit,
    drain,
    pct,
    pod,
    rss_mib,
    skipped,
    unmet,
)
from bench.workloads.schedulers import apply_crds, start
from tests.realcluster import hollow
from tests.realcluster.cluster import Cluster
from tests.realcluster.control import audit_log
from tests.realcluster.procs import wait_until
from tests.realcluster.rest import Rest, parallel

NAME = "against_kube"
ROOT = Path(__file__).resolve().parents[1]
SCHEDULERS = ("kube", "kube-json", "kube-http1", "koord", "koord-profile", "extender")
DEFAULT = ("kube", "koord", "koord-profile", "extender")
PODS = f"/api/v1/namespaces/{NS}/pods"
NO_LIFECYCLE = ("--controllers=*,-node-lifecycle-controller",)


def usage(i: int) -> tuple[int, int]:
    """Node ``i``'s reported usage: 10-50 % of its CPU, 20-60 % of its memory (spread, not random)."""
    return 4000 * (10 + (i * 37) % 41) // 100, 32 * 2**30 * (20 + (i * 53) % 41) // 100


def prepare(c: Cluster, rest: Rest, nodes: int, pods: int, workload: str = "basic") -> None:
    """CRDs, namespaces, nodes, the backlog of pods, then the NodeMetrics (freshest last)."""
    apply_crds(c, rest)
    names = [f"node-{i:05d}" for i in range(nodes)]
    objs = [hollow.node_object(n, labels={ZONE: f"zone-{i % 3}"}) for i, n in enumerate(names)]
    hollow.create_nodes(rest, objs)
    wait_until(
        "the default ServiceAccount",
        lambda: rest.get(f"/api/v1/namespaces/{NS}/serviceaccounts/default"),
        60,
    )
    made = [pod(f"p-{i:05d}", workload=workload) for i in range(pods)]
    parallel(lambda p: rest.create(f"/api/v1/namespaces/{NS}/pods", p), made)
    hollow.create_nodemetrics(rest, {n: usage(i) for i, n in enumerate(names)})


def paced(
    rest: Rest, audit: Audit, count: int, every: float, workload: str = "basic"
) -> tuple[list[float], list[str]]:
    """``count`` pods one every ``every`` seconds; their create -> bound latencies, ms, and names."""
    names = [f"q-{i:04d}" for i in range(count)]
    for n in names:
        t = time.monotonic()
        rest.create(f"/api/v1/namespaces/{NS}/pods", pod(n, workload=workload))
        time.sleep(max(0.0, every - (time.monotonic() - t)))
    wait_until("the paced pods bound", lambda: audit.has_bound(*names), 60)
    return [(audit.bound[n] - audit.created[n]) * 1000 for n in names], names


def preemption(kind: str, rounds: int, work: Path) -> list[float]:
    """On one node (1 CPU) of a fresh control plane: a pod of 800m placed, then a pod of 800m and higher
    priority, which preempts it; once the victim is marked for deletion, this bench deletes it for good
    (grace 0: a kubelet whose pause container stopped at once). Per round, seconds from the victim gone
    (the delete's audit time) to the preemptor's binding."""
    state = work / f"preempt-{kind}"
    c = Cluster(state, with_node=False, controller_flags=NO_LIFECYCLE)
    try:
        c.up(say=lambda _: None, with_stack=False, with_scheduler=False)
        rest = Rest.admin(c.pki, c.server)
        apply_crds(c, rest)
        rest.create(
            "/apis/scheduling.k8s.io/v1/priorityclasses", {"metadata": {"name": "high"}, "value": 1000}
        )
        one = hollow.node_object("node-0", capacity={"cpu": "1", "memory": "4Gi", "pods": "110"})
        hollow.create_nodes(rest, [one])
        wait_until(
            "the default ServiceAccount",
            lambda: rest.get(f"/api/v1/namespaces/{NS}/serviceaccounts/default"),
            60,
        )
        procs, _, _ = start(kind, c, state, 5000, 5000, None)
        audit = Audit(audit_log(state))
        out = []
        for r in range(rounds):
            victim, preemptor = pod(f"victim-{r}"), pod(f"preemptor-{r}")
            for p in (victim, preemptor):
                p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "800m"}}
            preemptor["spec"]["priorityClassName"] = "high"
            v, q = victim["metadata"]["name"], preemptor["metadata"]["name"]
            rest.create(PODS, victim)
            wait_until(f"{v} bound", functools.partial(audit.has_bound, v), 60, watch=procs)
            rest.create(PODS, preemptor)

            def marked(v: str = v) -> object:
                return rest.get(f"{PODS}/{v}")["metadata"].get("deletionTimestamp")

            wait_until(f"{v} marked for deletion", marked, 60, every=0.01)
            rest.request("DELETE", f"{PODS}/{v}?gracePeriodSeconds=0")
            wait_until(f"{q} bound", functools.partial(audit.has_bound, q), 60, watch=procs)
            out.append(audit.bound[q] - audit.deleted[v])
            rest.request("DELETE", f"{PODS}/{q}?gracePeriodSeconds=0")
        rest.close()
        return out
    finally:
        c.down(say=lambda _: None)
        shutil.rmtree(state, ignore_errors=True)


def spread(rest: Rest, nodes: int) -> dict[str, Any]:
    items = rest.get(f"/api/v1/namespaces/{NS}/pods")["items"]
    per_node = Counter(p["spec"].get("nodeName") for p in items if p["metadata"]["name"].startswith("p-"))
    hist = Counter(per_node.values())
    hist[0] = nodes - len(per_node)
    return {
        "empty_nodes": hist[0],
        "max_per_node": max(per_node.values()),
        "hist": dict(sorted(hist.items())),
    }


def run(
    kind: str,
    nodes: int,
    pods: int,
    paced_pods: int,
    work: Path,
    qps: float,
    burst: int,
    profile_dir: Path | None = None,
    workload: str = "basic",
    trace_dir: Path | None = None,
) -> dict[str, Any]:
    if workload == "anti-affinity":  # a node each: leave room for the paced pods
        pods = min(pods, nodes * 8 // 10)
        paced_pods = min(paced_pods, nodes - pods)
    state = work / f"{kind}-{nodes}"
    c = Cluster(state, with_node=False, controller_flags=NO_LIFECYCLE)
    try:
        c.up(say=lambda _: None, with_stack=False, with_scheduler=False)
        rest = Rest.admin(c.pki, c.server)
        t = time.monotonic()
        prepare(c, rest, nodes, pods, workload)
        setup_s = time.monotonic() - t
        load = os.getloadavg()[0]
        api = [c.procs["kube-apiserver"], c.procs["etcd"]]
        prof = profile_dir / f"{kind}-{nodes}.prof" if profile_dir and kind.startswith("koord") else None
        trace = trace_dir / f"{kind}-{nodes}.json" if trace_dir and kind.startswith("koord") else None
        procs, t0, note = start(kind, c, state, qps, burst, prof, trace)
        audit = Audit(audit_log(state))
        d = drain(audit, procs, api, pods, timeout=max(180.0, pods / 5))
        rss, peak = rss_mib(procs)
        time.sleep(1.0)
        lat, names = paced(rest, audit, paced_pods, 0.1, workload)
        res = {
            "kind": kind,
            "workload": workload,
            "nodes": nodes,
            "pods": pods,
            "paced": paced_pods,
            "pods_per_s": round(pods / max(d["last"] - d["first"], 1e-3), 1),
            "first_bind_s": round(d["first"] - t0, 2),
            "lat_p50_ms": round(pct(lat, 0.5), 1),
            "lat_p99_ms": round(pct(lat, 0.99), 1),
            # The scheduler's share (watch, cycle, the Binding sent) and kube-apiserver's bind, split at
            # the binding's arrival on the audit clock.
            "to_bind_p50_ms": round(
                pct([(audit.bind_received[n] - audit.created[n]) * 1000 for n in names], 0.5), 2
            ),
            "bind_p50_ms": round(
                pct([(audit.bound[n] - audit.bind_received[n]) * 1000 for n in names], 0.5), 2
            ),
            "cpu_s": round(d["cpu_total"], 2),
            "cpu_ms_per_pod": d["cpu_ms_per_pod"],
            "api_ms_per_pod": d["api_ms_per_pod"],
            "rss_mib": rss,
            "peak_rss_mib": peak,
            "binds": audit.binds,
            "failed_binds": audit.failed_binds,
            "setup_s": round(setup_s, 1),
            "loadavg": round(load, 2),
            "note": note,
            **spread(rest, nodes),
        }
        rest.close()
        if prof is not None:
            procs[0].stop(timeout=60)  # the profiler writes its file at exit
            profiled.print_top(prof, pods + paced_pods)
        if trace is not None:
            procs[0].stop(timeout=60)  # the marks are written at exit
            traced.print_stages(trace, audit.created, audit.bound, names)
        return res
    finally:
        c.down(say=lambda _: None)
        shutil.rmtree(state, ignore_errors=True)


def median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median pods/s (its figures all from one run), with every run's pods/s and CPU/pod."""
    ranked = sorted(rows, key=lambda r: r["pods_per_s"])
    mid = dict(ranked[len(ranked) // 2])
    mid["all_pods_per_s"] = [r["pods_per_s"] for r in rows]
    mid["all_cpu_ms_per_pod"] = [r["cpu_ms_per_pod"] for r in rows]
    return mid


def report(rows: list[dict[str, Any]]) -> None:
    """One table per node count: each figure with its ratio to kube-scheduler's in parentheses."""
    ref = next((r for r in rows if r["kind"] == "kube"), rows[0])

    def cell(r: dict[str, Any], key: str) -> str:
        v, k = r[key], ref[key]
        return f"{v:g} ({v / k:.2f}x)" if k else f"{v:g}"

    n = rows[0]["nodes"]
    head = f"{rows[0]['workload']}: {n} nodes, {rows[0]['pods']} backlog pods, {rows[0]['paced']} paced"
    print(f"\n{head} (ratio to kube-scheduler; of several runs, the run of median pods/s)")
    cols = ("pods/s", "first bind s", "p50 ms", "p99 ms", "CPU s", "CPU ms/pod", "RSS MiB", "peak MiB")
    keys = (
        "pods_per_s",
        "first_bind_s",
        "lat_p50_ms",
        "lat_p99_ms",
        "cpu_s",
        "cpu_ms_per_pod",
        "rss_mib",
        "peak_rss_mib",
    )
    print(f"  {'scheduler':<14}" + "".join(f"{c:>17}" for c in cols) + f"{'api ms/pod':>11}  load")
    for r in rows:
        cells = "".join(f"{cell(r, k):>17}" for k in keys)
        print(f"  {r['kind']:<14}{cells}{r['api_ms_per_pod']:>11g}  {r['loadavg']}", flush=True)
    if len(rows[0]["all_pods_per_s"]) > 1:
        for r in rows:
            runs, cpu = r["all_pods_per_s"], r["all_cpu_ms_per_pod"]
            print(f"  {r['kind']:<14} runs: pods/s {runs}, CPU ms/pod {cpu}")
    for r in rows:
        print(
            f"  {r['kind']:<14} idle p50 split: create -> its binding received {r['to_bind_p50_ms']} ms "
            f"({r['to_bind_p50_ms'] / ref['to_bind_p50_ms']:.2f}x), the bind {r['bind_p50_ms']} ms"
        )
    for r in rows:
        print(
            f"  {r['kind']:<14} spread: {r['empty_nodes']} nodes empty, at most {r['max_per_node']} pods "
            f"on a node; nodes by pods: {r['hist']}" + (f"; {r['note']}" if r["note"] else "")
        )
    for r in rows:
        if r["binds"] != r["pods"] + r["paced"] or r["failed_binds"]:
            want = r["pods"] + r["paced"]
            print(f"  {r['kind']}: {r['binds']} bindings for {want} pods, {r['failed_binds']} refused")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 nodes, 300 pods (a couple of minutes)")
    parser.add_argument("--nodes", default="", help="comma-separated node counts (default 500,1000,5000)")
    parser.add_argument("--pods", type=int, default=0, help="backlog pods per run (default 3000)")
    parser.add_argument("--paced", type=int, default=0, help="pods on the idle scheduler (default 100)")
    parser.add_argument(
        "--schedulers", default=",".join(DEFAULT), help=f"of {','.join(SCHEDULERS)}, run in that order"
    )
    parser.add_argument("--qps", type=float, default=5000, help="clientConnection.qps of both schedulers")
    parser.add_argument("--burst", type=int, default=5000, help="clientConnection.burst of both schedulers")
    parser.add_argument("--workload", choices=WORKLOADS, default="basic", help="the pods' shape")
    parser.add_argument("--repeat", type=int, default=1, help="runs per scheduler; the median is shown")
    parser.add_argument(
        "--profile", type=Path, default=None, help="run koord-scheduler under cProfile, its stats here"
    )
    parser.add_argument(
        "--trace", type=Path, default=None, help="mark each stage of koord-scheduler's pods, the marks here"
    )
    opts = parser.parse_args()
    if opts.profile is not None and opts.trace is not None:
        parser.error("--profile and --trace measure the same run differently: give one")
    opts.profile, opts.trace = (p and p.resolve() for p in (opts.profile, opts.trace))
    for where in (opts.profile, opts.trace):
        if where is not None:
            where.mkdir(parents=True, exist_ok=True)
    sizes = (
        [int(x) for x in opts.nodes.split(",")]
        if opts.nodes
        else ([100] if opts.quick else [500, 1000, 5000])
    )
    pods = opts.pods or (300 if opts.quick else 3000)
    paced_pods = opts.paced or (20 if opts.quick else 100)
    asked = opts.schedulers.split(",")
    unknown = sorted(set(asked) - set(SCHEDULERS))
    if unknown:
        parser.error(f"unknown --schedulers {','.join(unknown)}: choose from {','.join(SCHEDULERS)}")
    kinds = [k for k in SCHEDULERS if k in asked]

    why = unmet()
    if why:
        skipped(NAME, why)
        return

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still stop the control plane
    work = Path(tempfile.mkdtemp(prefix="bench-against-kube-"))
    result: dict[str, Any] = {"bench": NAME, "qps": opts.qps, "burst": opts.burst, "runs": []}
    try:
        for n in sizes:
            by_kind: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
            for rep in range(max(opts.repeat, 1)):  # interleaved: a slow spell of the machine hits all
                for kind in kinds:
                    print(f"-- {kind}, {opts.workload}, {n} nodes, {pods} pods (run {rep + 1})", flush=True)
                    row = run(
                        kind,
                        n,
                        pods,
                        paced_pods,
                        work,
                        opts.qps,
                        opts.burst,
                        opts.profile,
                        opts.workload,
                        opts.trace,
                    )
                    by_kind[kind].append(row)
                    result["runs"].append(row)
            report([median_row(by_kind[k]) for k in kinds])
        rounds = 0 if opts.workload != "basic" else 2 if opts.quick else 5
        if rounds:
            print(f"\npreemption: victim gone -> preemptor bound, {rounds} rounds each (one node)")
        for kind in [
            k for k in kinds if k != "extender" and rounds
        ]:  # the extender's runs preempt with kube-scheduler
            took = preemption(kind, rounds, work)
            each = result[f"preemption_s_{kind}"] = [round(x, 3) for x in took]
            print(f"  {kind:<14} median {statistics.median(took):.3f} s, max {max(took):.3f} s  {each}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
