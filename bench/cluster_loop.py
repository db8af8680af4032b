"""The colocation loop at cluster scale, by simulation: 1000 hollow nodes (``--quick``: 100) on a real
kube-apiserver, each node's agent and kubelet stood in for by the hollow reporter (NodeMetric reports
every 60 s with a usage that drifts, Lease renewals every 10 s, a Ready heartbeat every 5 min:
:class:`tests.realcluster.hollow.HollowReporter`), with koord-manager, koord-scheduler (its shipped
profile, LoadAwareScheduling on) and koord-descheduler running as ``deploy/`` runs them (each replica a
host process with its ServiceAccount's token: :mod:`tests.realcluster.stack`), and kube-scheduler beside
them (the built binary, ``clientConnection`` qps/burst 5000).

Printed:

- **requests/s per client** from kube-apiserver's audit log (every request at Metadata level, by user
  agent), over a quiet window (nothing scheduled) and over each scheduler's drain, with the top requests
  of each client; and each process's CPU over the quiet window (the hollow reporter's is the bench's);
- **koord-manager's node-change latency**: a node's reported load jumps (to 85 % CPU) -> the node's
  ``kubernetes.io/batch-cpu`` changes, for a few nodes at once (median, max);
- **scheduler throughput** with LoadAwareScheduling on: a backlog of pods for koord-scheduler (made while
  its replicas are stopped, then they start again), then the same for kube-scheduler on the same nodes
  (pods/s from first to last binding, first bind after the start; ratio koord / kube);
- **a descheduling round's duration** (koord-descheduler's own log of each round: median, max) over the
  run, beside the number of nodes it looked at.

Figures vary with what else runs on the machine; the load average is printed.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.workloads.realsched import AUDIT_ALL, NS, Audit, cpu_seconds, pct, pod, skipped, unmet
from bench.workloads.schedulers import start_kube_scheduler
from tests.realcluster import hollow, stack
from tests.realcluster.cluster import Cluster
from tests.realcluster.control import audit_log
from tests.realcluster.procs import Started, wait_until
from tests.realcluster.rest import Rest, parallel

NAME = "cluster_loop"
KOORD = "koord-scheduler"
COMPONENTS = (
    (stack.DEPLOY / "manager" / "koord-manager.yaml", "koord-manager"),
    (stack.DEPLOY / "scheduler" / "koord-scheduler.yaml", "koord-scheduler"),
    (stack.DEPLOY / "descheduler" / "koord-descheduler.yaml", "koord-descheduler"),
)
BATCH_CPU = "kubernetes.io/batch-cpu"
TTL = "node.alpha.kubernetes.io/ttl"
_ROUND = re.compile(r"round (\d+): (\d+) nodes, (\d+) eviction\(s\).* in (\d+) ms")


def start_stack(c: Cluster, node: str) -> list[Started]:
    """``deploy/`` applied, then koord-manager, koord-scheduler and koord-descheduler (every replica)."""
    stack.apply_deploy(c.admin_kubeconfig, node)
    work = c.state / "stack"
    procs = []
    for manifest, name in COMPONENTS:
        for run in stack.host_runs(
            manifest, name, work=work, node=node, host_paths={}, bin_dir=stack.venv_bin()
        ):
            running = stack.start(
                run, work=work, logs=c.logs, admin=c.admin_kubeconfig, server=c.server, ca=c.pki / "ca.crt"
            )
            procs.append(c.adopt(running.proc))
    for p in procs:
        wait_until(f"{p.name} ready", functools.partial(c.ready, p), 120, watch=[p])
    return procs


def kcm_settled(rest: Rest, n: int) -> bool:
    """kube-controller-manager has registered every node (a RegisteredNode Event each) and its TTL
    controller has annotated them all alike (it rewrites every node as the cluster grows past a size
    step; at its default 20 requests/s, 1000 nodes take it a minute): its start-up traffic is over."""
    events = rest.get("/api/v1/events")["items"]
    if sum(e["reason"] == "RegisteredNode" for e in events) < n:
        return False
    ttls = [(x["metadata"].get("annotations") or {}).get(TTL) for x in rest.get("/api/v1/nodes")["items"]]
    return None not in ttls and len(set(ttls)) == 1


def batch_cpu(rest: Rest, name: str) -> str:
    return str(rest.get(f"/api/v1/nodes/{name}")["status"]["allocatable"].get(BATCH_CPU, ""))


def nodes_with_batch(rest: Rest) -> int:
    items = rest.get("/api/v1/nodes")["items"]
    return sum(1 for n in items if BATCH_CPU in n["status"].get("allocatable", {}))


def change_latency(rest: Rest, reporter: hollow.HollowReporter, names: list[str]) -> list[float]:
    """Each node's load jumps to 85 % at once; seconds until its batch-cpu changed."""
    before = {n: batch_cpu(rest, n) for n in names}
    sent = {n: reporter.set_load(n, 0.85) for n in names}
    seen: dict[str, float] = {}
    deadline = time.time() + 180
    while len(seen) < len(names) and time.time() < deadline:
        for n in names:
            if n not in seen and batch_cpu(rest, n) != before[n]:
                seen[n] = time.time() - sent[n]
        time.sleep(0.1)
    missing = [n for n in names if n not in seen]
    if missing:
        print(f"  batch-cpu unchanged after 180 s on {', '.join(missing)}")
    return sorted(seen.values())


def drain(
    c: Cluster, rest: Rest, audit: Audit, procs: list[str], scheduler: str, prefix: str, pods: int
) -> dict[str, Any]:
    """A backlog of ``pods`` pending pods for ``scheduler``, made while its processes (``procs``) are
    stopped (made while it runs, the pods would arrive slower than it places them on this machine), then
    those started again: pods/s from the first binding to the last, and the first binding after the
    start."""
    for name in procs:
        c.procs[name].stop()
    body = [pod(f"{prefix}-{i:05d}", scheduler) for i in range(pods)]
    parallel(lambda p: rest.create(f"/api/v1/namespaces/{NS}/pods", p), body)
    started = time.time()
    for name in procs:
        c.adopt(c.procs[name].again())

    def all_bound() -> bool:
        audit.read()
        return sum(1 for n in audit.bound if n.startswith(prefix)) >= pods

    wait_until(f"{pods} pods bound by {scheduler}", all_bound, max(300.0, pods / 5), every=0.2)
    times = sorted(t for n, t in audit.bound.items() if n.startswith(prefix))
    return {
        "pods_per_s": round(pods / max(times[-1] - times[0], 1e-3), 1),
        "first_bind_s": round(times[0] - started, 2),
        "window": (times[0], times[-1]),
    }


def print_rates(title: str, rates: dict[str, Any], seconds: float) -> dict[str, float]:
    print(f"  requests/s by client, {title} ({seconds:.0f} s):")
    out = {}
    for who, counts in sorted(rates.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(counts.values())
        out[who] = round(total / seconds, 2)
        top = ", ".join(f"{k} {v / seconds:.1f}" for k, v in counts.most_common(4))
        print(f"    {who:<26} {total / seconds:8.2f}   ({top})")
    return out


def descheduler_rounds(c: Cluster) -> list[tuple[int, float]]:
    """(nodes, ms) of every round a koord-descheduler replica logged (the leader's; this run's)."""
    out = []
    for log in sorted(c.logs.glob("koord-descheduler*.log")):
        for m in _ROUND.finditer(log.read_text(errors="replace")):
            out.append((int(m.group(2)), float(m.group(4))))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 nodes, 300 pods, a 20 s window")
    parser.add_argument("--nodes", type=int, default=0, help="hollow nodes (default 1000)")
    parser.add_argument("--pods", type=int, default=0, help="pods per scheduler (default 2000)")
    parser.add_argument("--window", type=float, default=0, help="quiet window, seconds (default 60)")
    opts = parser.parse_args()
    n = opts.nodes or (100 if opts.quick else 1000)
    pods = opts.pods or (300 if opts.quick else 2000)
    window = opts.window or (20.0 if opts.quick else 60.0)
    changed = 3 if opts.quick else 10

    why = unmet()
    if why:
        skipped(NAME, why)
        return

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still stop the control plane
    work = Path(tempfile.mkdtemp(prefix="bench-cluster-loop-"))
    c = Cluster(work / "cluster", with_node=False, audit_policy=AUDIT_ALL)
    reporter: hollow.HollowReporter | None = None
    result: dict[str, Any] = {"bench": NAME, "nodes": n, "pods": pods}
    try:
        began = time.time()
        c.up(say=lambda _: None, with_stack=False, with_scheduler=False)
        rest = Rest.admin(c.pki, c.server)
        names = [f"node-{i:05d}" for i in range(n)]
        zone = "topology.kubernetes.io/zone"
        hollow.create_nodes(
            rest, [hollow.node_object(x, labels={zone: f"zone-{i % 3}"}) for i, x in enumerate(names)]
        )
        reporter = hollow.HollowReporter(Rest.admin(c.pki, c.server, user_agent="hollow-reporter"), names)
        reporter.start()
        start_stack(c, names[0])
        start_kube_scheduler(c, c.state, 5000, 5000, kubeconfig=c.state / "scheduler.kubeconfig")
        rest.create("/api/v1/namespaces", {"metadata": {"name": NS}}, exist_ok=True)
        wait_until(
            "a NodeMetric per node (koord-manager makes them)",
            lambda: len(rest.get(hollow.NODEMETRICS)["items"]) >= n,
            120,
        )
        # The agents' first reports, as they come once their NodeMetric exists.
        parallel(lambda x: hollow.report_metric(rest, x, *reporter.usage(x)), names)
        wait_until("batch resources on every node", lambda: nodes_with_batch(rest) >= n, 180)
        wait_until(
            "kube-controller-manager done with the new nodes", lambda: kcm_settled(rest, n), 300, every=2.0
        )
        wait_until(
            "the default ServiceAccount",
            lambda: rest.get(f"/api/v1/namespaces/{NS}/serviceaccounts/default"),
            60,
        )
        up = time.time() - began
        print(f"{n} hollow nodes up with the stack in {up:.0f} s; load {os.getloadavg()[0]:.2f}")
        audit = Audit(audit_log(c.state), requests=[])
        audit.read()

        # A quiet window: the loop's own traffic.
        procs = {p.name: [p] for p in [*c.procs.values()] if p.name != "koord-scheduler-extender"}
        cpu0 = {k: cpu_seconds(v) for k, v in procs.items()}
        me0 = time.process_time()
        t0 = time.time()
        time.sleep(window)
        t1 = time.time()
        cpu1 = {k: cpu_seconds(v) for k, v in procs.items()}
        me1 = time.process_time()
        audit.read()
        result["quiet_rps"] = print_rates("quiet", audit.rates(t0, t1), t1 - t0)
        print(f"  CPU % over the quiet window ({window:.0f} s):")
        busy = {k: round((cpu1[k] - cpu0[k]) * 100 / (t1 - t0), 1) for k in procs}
        busy["hollow reporter + this bench"] = round((me1 - me0) * 100 / (t1 - t0), 1)
        for k, v in sorted(busy.items(), key=lambda kv: -kv[1]):
            print(f"    {k:<32} {v:6.1f}")
        result["quiet_cpu_pct"] = busy

        # koord-manager: a node's load jumps -> its batch resources.
        low = sorted(names, key=lambda x: reporter.usage(x)[0])[:changed]
        lat = change_latency(rest, reporter, low)
        if lat:
            result["manager_change_s_p50"] = round(statistics.median(lat), 2)
            result["manager_change_s_max"] = round(max(lat), 2)
            print(
                f"koord-manager node-change latency ({len(lat)} nodes at once, NodeMetric report -> "
                f"batch-cpu updated): median {result['manager_change_s_p50']} s, "
                f"max {result['manager_change_s_max']} s"
            )

        # The schedulers, one after the other, on the same nodes.
        koord = [name for name in c.procs if name.startswith(KOORD)]
        runs = ((KOORD, KOORD, "k", koord), ("kube-scheduler", "default-scheduler", "d", ["kube-scheduler"]))
        for who, scheduler, prefix, names_ in runs:
            d = drain(c, rest, audit, names_, scheduler, prefix, pods)
            audit.read()
            w0, w1 = d.pop("window")
            result[f"{who}_pods_per_s"] = d["pods_per_s"]
            result[f"{who}_first_bind_s"] = d["first_bind_s"]
            print(
                f"{who}: {pods} pods at {d['pods_per_s']} pods/s, first bind {d['first_bind_s']} s after "
                f"its start (load {os.getloadavg()[0]:.2f})"
            )
            result[f"{who}_drain_rps"] = print_rates(
                f"during {who}'s drain", audit.rates(w0, w1), max(w1 - w0, 1e-3)
            )
        k, kk = result[f"{KOORD}_pods_per_s"], result["kube-scheduler_pods_per_s"]
        result["ratio"] = round(k / kk, 2) if kk else None
        print(f"koord-scheduler (LoadAware on) / kube-scheduler pods/s: {result['ratio']}")

        rounds = descheduler_rounds(c)
        if rounds:
            ms = [r[1] for r in rounds]
            result["deschedule_round_ms_p50"] = statistics.median(ms)
            result["deschedule_round_ms_max"] = max(ms)
            print(
                f"koord-descheduler: {len(ms)} rounds over {max(r[0] for r in rounds)} nodes, median "
                f"{statistics.median(ms):.0f} ms, p99 {pct(ms, 0.99):.0f} ms, max {max(ms):.0f} ms"
            )
        result["reporter_sent"] = dict(reporter.sent)
        result["reporter_lag_s"] = round(reporter.lag, 2)
        print(f"hollow reporter: {reporter.sent} requests, largest lag behind a beat {reporter.lag:.2f} s")
    finally:
        if reporter is not None:
            reporter.stop()
        c.down(say=lambda _: None)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
