"""The agent's cluster-mode informer as a process: memory and CPU while its cluster churns, and the lists
an API server outage costs it.

The in-repo test API server holds a cluster (500 nodes, each with its NodeMetric and NodeSLO; 110 pods
on the agent's node and 3000 on the others). A child process runs the agent's ``StatesInformer`` in
cluster mode with pods from the API server (``--pod-source=api``: the agent's largest watch), PLEG and
NodeMetric reporting off, so what is measured is the list+watch side. Its floor is a child that
imports the same modules and follows the same pod stream with nothing else: a raw list of the node's
pods by field selector, then one raw watch, ``json.loads`` of each event into a dict. Both run in turn
against the same churn: a label patch on a pod of the agent's node every 100 ms, and on pods of other
nodes every 10 ms (which the field selectors must keep away from the agent).

Figures: ``rss_mib`` / ``floor_rss_mib`` (resident set after sync and churn), ``cpu_pct_core`` /
``floor_cpu_pct_core`` (user+system time over the churn window, in % of one core), ``outage_lists``
(list requests the agent sent to recover from a 3 s outage: a watch that resumes from its
resourceVersion needs none), ``sync_ms`` (start to has_synced). ``ratio`` is ``rss_mib`` over
``floor_rss_mib``. ``pod_refreshes`` (the agent's pod snapshot rebuilds) and ``floor_events`` (events
the floor decoded) show both followed the churn.

Run from the repository root as ``python -m bench.agent_informer [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from typing import Any

import psutil

try:
    from tests.apiserver import APIServer
    from tests.apiserver.fixtures import DEFAULT_CRDS
except ModuleNotFoundError as err:
    if err.name != "tests":
        raise
    sys.exit(
        "bench/agent_informer.py serves its cluster from the repository's test API server (tests/apiserver):"
        " run it from the repository root as `python -m bench.agent_informer` (make bench does)"
    )

NAME = "agent_informer"
NODE = "bench-node"
SLO_API = "slo.koordinator.sh/v1alpha1"
MINE, OTHERS, NODES = 110, 3000, 500


def pod(name: str, node: str) -> dict[str, Any]:
    """A Burstable pod with its status as a kubelet reports it (every required field of the status)."""
    from koordlet.testing.kubelet import pod_object

    obj = pod_object(
        str(uuid.uuid4()),
        name,
        node=node,
        qos_class="Burstable",
        labels={"app": name.rsplit("-", 1)[0], "rev": "0"},
        requests={"cpu": "100m", "memory": "128Mi"},
        limits={"cpu": "1", "memory": "1Gi"},
    )
    obj["status"]["containerStatuses"] = [
        {
            "name": "main",
            "containerID": f"containerd://{uuid.uuid4().hex}{uuid.uuid4().hex}",
            "image": "busybox",
            "imageID": "docker.io/library/busybox@sha256:" + "0" * 64,
            "ready": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
        }
    ]
    return obj


def populate(server: APIServer) -> None:
    store = server.store
    for i in range(NODES):
        name = NODE if i == 0 else f"node-{i:04d}"
        store.create(
            "nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"capacity": {"cpu": "32", "memory": "128Gi"}, "allocatable": {"cpu": "31"}},
            },
        )
        meta = {"name": name}
        spec = {"metricCollectPolicy": {"reportIntervalSeconds": 60, "aggregateDurationSeconds": 300}}
        store.create(
            "nodemetrics", {"apiVersion": SLO_API, "kind": "NodeMetric", "metadata": meta, "spec": spec}
        )
        store.create(
            "nodeslos",
            {
                "apiVersion": SLO_API,
                "kind": "NodeSLO",
                "metadata": meta,
                "spec": {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 65}},
            },
        )
    for i in range(MINE):
        store.create("pods", pod(f"mine-{i}", NODE), "default")
    for i in range(OTHERS):
        store.create("pods", pod(f"other-{i}", f"node-{1 + i % (NODES - 1):04d}"), "default")


# ---- the two children ----------------------------------------------------------------------------


def run_agent(url: str, token: str, ready: Any) -> None:
    from kubernetes import client
    from prometheus_client import CollectorRegistry

    from koordlet.metriccache import MetricCache
    from koordlet.statesinformer.config import InformerConfig
    from koordlet.statesinformer.informer import StatesInformer
    from koordlet.system.host import Host
    from koordlet.system.paths import HostPaths
    from koordshared.runtime.eventbus import EventBus
    from koordshared.runtime.lifecycle import Supervisor

    conf = client.Configuration(host=url)
    conf.api_key = {"authorization": f"Bearer {token}"}
    cfg = InformerConfig(
        node_name=NODE,
        standalone=False,
        client_configuration=conf,
        pod_source="api",
        pleg=False,
        enable_node_metric_report=False,
        max_backoff_seconds=1.0,
        request_timeout_seconds=2.0,
    )
    registry = CollectorRegistry()
    inf = StatesInformer(cfg, Host(HostPaths()), MetricCache(), EventBus(), registry)
    stop = threading.Event()
    sup = Supervisor(stop)
    t0 = time.perf_counter()
    inf.start(stop, sup)
    while not inf.has_synced():
        time.sleep(0.005)
    ready(f"synced {len(inf.pods())} {(time.perf_counter() - t0) * 1000:.1f}")
    sys.stdin.read()  # until the parent closes our stdin
    refreshes = registry.get_sample_value("koordlet_pods_refresh_total", {"result": "ok"}) or 0
    ready(f"pods {len(inf.pods())} {refreshes:.0f}")
    stop.set()
    inf.shutdown()
    sup.join(time.monotonic() + 5)


def run_floor(url: str, token: str, ready: Any) -> None:
    import kubernetes.client  # noqa: F401  (the same import footprint as the agent)

    import koordlet.statesinformer.informer  # noqa: F401

    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    sel = f"fieldSelector=spec.nodeName%3D{NODE}"
    t0 = time.perf_counter()
    req = urllib.request.Request(f"{url}/api/v1/pods?{sel}", headers=headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        doc = json.loads(r.read())
    pods = {p["metadata"]["uid"]: p for p in doc["items"]}
    rv = doc["metadata"]["resourceVersion"]
    ready(f"synced {len(pods)} {(time.perf_counter() - t0) * 1000:.1f}")
    watch = urllib.request.Request(
        f"{url}/api/v1/pods?{sel}&watch=true&resourceVersion={rv}&timeoutSeconds=600", headers=headers
    )

    events = 0

    def follow() -> None:
        nonlocal events
        try:
            with urllib.request.urlopen(watch, timeout=660) as r:
                for line in r:
                    ev = json.loads(line)
                    events += 1
                    obj = ev["object"]
                    if ev["type"] == "DELETED":
                        pods.pop(obj["metadata"]["uid"], None)
                    elif ev["type"] in ("ADDED", "MODIFIED"):
                        pods[obj["metadata"]["uid"]] = obj
        except OSError:
            pass  # the parent ends the server's watches at the end

    threading.Thread(target=follow, daemon=True, name="floor-watch").start()
    sys.stdin.read()
    ready(f"pods {len(pods)} {events}")


def child(kind: str, url: str, token: str) -> None:
    def ready(line: str) -> None:
        print(line, flush=True)

    (run_agent if kind == "agent" else run_floor)(url, token, ready)


# ---- the parent ----------------------------------------------------------------------------------


def churn(server: APIServer, seconds: float) -> None:
    """A pod of this node relabelled every 100 ms, a pod of another node every 10 ms."""
    store = server.store
    end = time.monotonic() + seconds
    run = uuid.uuid4().hex[:8]  # a fresh value per run: patching the value already there is no change
    i = 0
    while time.monotonic() < end:
        store.patch(
            "pods",
            f"other-{i % OTHERS}",
            {"metadata": {"labels": {"rev": f"{run}-{i}"}}},
            namespace="default",
        )
        if i % 10 == 0:
            store.patch(
                "pods",
                f"mine-{(i // 10) % MINE}",
                {"metadata": {"labels": {"rev": f"{run}-{i}"}}},
                namespace="default",
            )
        i += 1
        time.sleep(0.01)


def measure(server: APIServer, kind: str, seconds: float, outage: bool) -> dict[str, float]:
    token = server.auth.admin_token
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.agent_informer", "--child", kind, server.url, token],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    try:
        first = proc.stdout.readline().split()
        if not first or first[0] != "synced":
            raise SystemExit(f"{kind}: child did not sync: {first}")
        if int(first[1]) != MINE:
            raise SystemExit(f"{kind}: {first[1]} pods after sync, expected {MINE}")
        ps = psutil.Process(proc.pid)
        time.sleep(1.0)  # let the informer settle (watches open, first refresh done)
        cpu0 = ps.cpu_times()
        t0 = time.monotonic()
        churn(server, seconds)
        cpu1 = ps.cpu_times()
        wall = time.monotonic() - t0
        rss = ps.memory_info().rss
        lists = 0
        if outage:
            before = len(server.requests)
            server.down()
            time.sleep(3.0)
            server.up()
            time.sleep(4.0)  # the backoff cap is 1 s: every loop is back by then
            lists = sum(
                1
                for r in server.requests[before:]
                if r.method == "GET" and r.query.get("watch") != "true" and "/status" not in r.path
            )
        proc.stdin.close()
        last = proc.stdout.readline().split()
        if not last or int(last[1]) != MINE:
            raise SystemExit(f"{kind}: {last} at the end, expected {MINE} pods")
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    busy = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
    return {
        "sync_ms": float(first[2]),
        "rss_mib": rss / 2**20,
        "cpu_pct_core": 100 * busy / wall,
        "lists": float(lists),
        "handled": float(last[2]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a shorter churn (under 50 s)")
    parser.add_argument("--child", nargs=3, metavar=("KIND", "URL", "TOKEN"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    seconds = 8.0 if args.quick else 30.0
    with APIServer(crds=DEFAULT_CRDS, history_limit=100_000) as server:
        t0 = time.perf_counter()
        populate(server)
        print(f"populated in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        floor = measure(server, "floor", seconds, outage=False)
        agent = measure(server, "agent", seconds, outage=True)
    result = {
        "bench": NAME,
        "pods_on_node": MINE,
        "pods_in_cluster": MINE + OTHERS,
        "churn_s": seconds,
        "sync_ms": round(agent["sync_ms"], 1),
        "rss_mib": round(agent["rss_mib"], 1),
        "floor_rss_mib": round(floor["rss_mib"], 1),
        "cpu_pct_core": round(agent["cpu_pct_core"], 2),
        "floor_cpu_pct_core": round(floor["cpu_pct_core"], 2),
        "outage_lists": int(agent["lists"]),
        "pod_refreshes": int(agent["handled"]),
        "floor_events": int(floor["handled"]),
        "ratio": round(agent["rss_mib"] / floor["rss_mib"], 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
