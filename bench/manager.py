"""koord-manager at 5000 nodes: the initial sync, a full resync with nothing to write, one node change.

The in-repo test API server holds 5000 nodes (2 pods each) and their NodeMetric (with an agent's status)
and NodeSLO, already converged: specs as the manager renders them and batch resources as it computes
them. The manager runs in-process with its real informers (paged list + watch over HTTP) and
starts as the process does (the collector held while its caches fill, then the synced heap frozen; the
server shares the process, so ``sync_ms`` gains from the held collector too). Figures:
``sync_ms`` (list in pages of 500, decode and index every object; five informers at once) against
``fetch_floor_ms`` (the same pages fetched and decoded one after another, no cache work: mostly the test
API server, whose paging costs grow with the store) and ``decode_floor_ms`` (``json.loads`` of the
same objects' unpaged list bodies, fetched once); ``resync_ms`` (every node through the three
controllers, which must decide to write nothing, and check that they did not) and its per-node cost;
``change_ms`` (a node relabelled into another node strategy, until the manager's NodeMetric and NodeSLO
updates reached the server), against ``write_floor_ms`` (one PUT of a NodeSLO by a bare client).
Medians over rounds.
``ratio`` is ``resync_ms`` over ``decode_floor_ms``. Target: ``change_ms`` < 50 at 5000 nodes.

Run from the repository root as ``python -m bench.manager [--quick]``: the test API server is the
repository's ``tests/apiserver``, which is not installed with the package.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import urllib.parse
import urllib.request
from typing import Any

from koord.manager import batchresource as br
from koord.manager.app import Manager
from koordshared.apis.configuration import slocontroller as sloconfig
from koordshared.apis.configuration.slocontroller import (
    collect_policy,
    node_strategy,
    parse_colocation_config,
)
from koordshared.apis.meta.quantity import format_bytes, format_decimal, format_time
from koordshared.apis.slo.nodemetric import parse_status
from koordshared.kube.client import make_api_client, request
from koordshared.runtime.lifecycle import Supervisor

try:  # the repository's test API server: importable when run as a module from the repository root
    from tests.apiserver import APIServer
    from tests.apiserver.fixtures import DEFAULT_CRDS
    from tests.managerharness import NS, configmap, ensure_namespace, manager_config, node
except ModuleNotFoundError as err:
    if err.name != "tests":
        raise
    sys.exit(
        "bench/manager.py serves its nodes from the repository's test API server (tests/apiserver): run it"
        " from the repository root as `python -m bench.manager` (make bench does)"
    )

NAME = "manager"
SLO_API = "/apis/slo.koordinator.sh/v1alpha1"
COLOCATION = {
    "enable": True,
    "nodeConfigs": [
        {"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}, "metricReportIntervalSeconds": 30}
    ],
}
THRESHOLDS = {
    "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60},
    "nodeStrategies": [
        {"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}, "cpuSuppressThresholdPercent": 45}
    ],
}


def pod(name: str, node_name: str, qos: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"koordinator.sh/qosClass": qos}},
        "spec": {
            "nodeName": node_name,
            "containers": [
                {"name": "c", "image": "app", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}
            ],
        },
        "status": {"phase": "Running"},
    }


def agent_status(pods: list[dict[str, Any]]) -> dict[str, Any]:
    def usage(cpu: str, mem: str) -> dict[str, Any]:
        return {"resources": {"cpu": cpu, "memory": mem}}

    return {
        "updateTime": format_time(time.time()),
        "nodeMetric": {"nodeUsage": usage("6", "40Gi"), "systemUsage": usage("500m", "2Gi")},
        "podsMetric": [
            {
                "namespace": "default",
                "name": p["metadata"]["name"],
                "priority": "koord-prod"
                if p["metadata"]["labels"]["koordinator.sh/qosClass"] == "LS"
                else "koord-batch",
                "qos": p["metadata"]["labels"]["koordinator.sh/qosClass"],
                "podUsage": usage("800m", "1Gi"),
            }
            for p in pods
        ],
    }


def populate(server: APIServer, n: int) -> None:
    """Converged objects, rendered with the manager's own functions so a resync has nothing to write."""
    store = server.store
    ensure_namespace(server)
    cm = configmap(colocation_config=COLOCATION, resource_threshold_config=THRESHOLDS)
    store.create("configmaps", cm)
    colo = parse_colocation_config(cm["data"]["colocation-config"])
    slo_cfg = {
        "resource-threshold-config": sloconfig.parse_key(
            "resource-threshold-config", cm["data"]["resource-threshold-config"]
        )
    }
    for i in range(n):
        name = f"node-{i:05d}"
        labels = {"pool": "a" if i % 2 else "b"}
        pods = [pod(f"{name}-ls", name, "LS"), pod(f"{name}-be", name, "BE")]
        for p in pods:
            store.create("pods", p)
        status = agent_status(pods)
        strategy = node_strategy(colo, labels, {})
        want = br.calculate(
            strategy, br.node_view(node(name, labels, "64", "256Gi")), pods, parse_status(status)
        )
        obj = node(name, labels, "64", "256Gi")
        for section in ("capacity", "allocatable"):
            obj["status"][section][br.BATCH_CPU] = format_decimal(want.cpu or 0)
            obj["status"][section][br.BATCH_MEMORY] = format_bytes(want.memory or 0)
        store.create("nodes", obj)
        nm_spec = collect_policy(strategy).to_spec()  # type: ignore[union-attr]
        meta = {"name": name}
        store.create(
            "nodemetrics",
            {
                "apiVersion": "slo.koordinator.sh/v1alpha1",
                "kind": "NodeMetric",
                "metadata": meta,
                "spec": nm_spec,
                "status": status,
            },
        )
        spec = sloconfig.render_spec(slo_cfg, labels, {})
        store.create(
            "nodeslos",
            {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": meta, "spec": spec},
        )


LISTS = ("/api/v1/nodes", f"{SLO_API}/nodemetrics", f"{SLO_API}/nodeslos", "/api/v1/pods")


def decode_floor(server: APIServer, rounds: int) -> float:
    """``json.loads`` of the list bodies the informers fetch (nodes, NodeMetrics, NodeSLOs, pods)."""
    bodies = []
    for path in LISTS:
        with urllib.request.urlopen(server.url + path, timeout=60) as r:
            bodies.append(r.read())
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for b in bodies:
            json.loads(b)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def fetch_floor(server: APIServer, page: int) -> float:
    """The same lists fetched as the informers do (pages of ``page``) and decoded, nothing else: what the
    test API server and the network cost before any cache work."""
    t0 = time.perf_counter()
    for path in LISTS:
        token = ""
        while True:
            query = f"?limit={page}" + (f"&continue={urllib.parse.quote(token)}" if token else "")
            with urllib.request.urlopen(server.url + path + query, timeout=60) as r:
                doc = json.loads(r.read())
            token = doc["metadata"].get("continue") or ""
            if not token:
                break
    return (time.perf_counter() - t0) * 1000


def drained(manager: Manager) -> bool:
    return all(len(c.queue) == 0 and not c.queue._processing for c in manager.controllers.values())


def writes(manager: Manager) -> float:
    return sum(
        s.value
        for metric in manager.metrics.writes.collect()
        for s in metric.samples
        if s.name.endswith("_total")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (under 50 s)")
    parser.add_argument("--nodes", type=int, default=5000)
    args = parser.parse_args()
    rounds = 3 if args.quick else 9
    n = args.nodes
    with APIServer(crds=DEFAULT_CRDS, history_limit=100_000) as server:
        t0 = time.perf_counter()
        populate(server, n)
        print(f"populated {n} nodes in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        floor_ms = decode_floor(server, rounds)
        fetch_ms = fetch_floor(server, 500)

        manager = Manager(
            manager_config(server, watch_timeout=600.0, workers=2),
            __import__("prometheus_client").CollectorRegistry(),
        )
        stop = threading.Event()
        sup = Supervisor(stop)
        t0 = time.perf_counter()
        manager.components()[0].start(stop, sup)
        while not manager.informers_synced():
            time.sleep(0.005)
        sync_ms = (time.perf_counter() - t0) * 1000
        manager.config.sync(manager.configmaps.get(f"{NS}/slo-controller-config"))
        # the controllers as the process starts them: the synced heap settled, every node enqueued
        manager.components()[-1].start(stop, sup)
        while not drained(manager):  # the handlers' initial adds and the first full pass
            time.sleep(0.005)

        resync = []
        for _ in range(rounds):
            before = writes(manager)
            t0 = time.perf_counter()
            manager.enqueue_everything()
            while not drained(manager):
                time.sleep(0.001)
            resync.append((time.perf_counter() - t0) * 1000)
            if writes(manager) != before:
                raise SystemExit("a converged resync wrote to the API server")

        api = make_api_client(client_configuration=server.client_config())
        change, write_floor = [], []
        for r in range(rounds):
            name = f"node-{2 * r:05d}"  # pool b: relabel into a (its NodeMetric and NodeSLO change)
            pool = "a"

            def landed(req: Any, name: str = name) -> bool:
                return req.method == "PUT" and req.path in (
                    f"{SLO_API}/nodemetrics/{name}",
                    f"{SLO_API}/nodeslos/{name}",
                )

            t0 = time.perf_counter()
            server.store.patch("nodes", name, {"metadata": {"labels": {"pool": pool}}})
            got = server.wait_for_requests(landed, count=2, timeout=10)  # one change: 2 PUTs
            change.append((time.perf_counter() - t0) * 1000)
            if len(got) < 2:
                raise SystemExit(f"{name}: the manager did not write both objects in 10 s")
            time.sleep(0.05)
            other = f"node-{2 * r + 1:05d}"
            obj = server.store.get("nodeslos", other)
            t0 = time.perf_counter()
            request(api, "floor", "PUT", f"{SLO_API}/nodeslos/{other}", body=obj)
            write_floor.append((time.perf_counter() - t0) * 1000)
        api.close()
        stop.set()
        for c in manager.controllers.values():
            c.shutdown()
        for inf in manager.informers:
            inf.close()
        sup.join(time.monotonic() + 5)
        manager.close()

    resync_ms = statistics.median(resync)
    result = {
        "bench": NAME,
        "nodes": n,
        "rounds": rounds,
        "sync_ms": round(sync_ms, 1),
        "fetch_floor_ms": round(fetch_ms, 1),
        "decode_floor_ms": round(floor_ms, 1),
        "resync_ms": round(resync_ms, 1),
        "resync_per_node_ms": round(resync_ms / n, 4),
        "change_ms": round(statistics.median(change), 2),
        "write_floor_ms": round(statistics.median(write_floor), 2),
        "change_under_50ms": statistics.median(change) < 50,
        "ratio": round(resync_ms / floor_ms, 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
