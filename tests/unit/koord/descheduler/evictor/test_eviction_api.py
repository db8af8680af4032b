"""Evictions through the test API server's Eviction API: under a round that would otherwise evict 100
pods, the evictor's limits hold, PodDisruptionBudget refusals (429) are skipped and retried in the next
round but never forced, every eviction leaves an Event, and a dry run evicts nothing."""

from __future__ import annotations

import time
from typing import Any

import pytest

from koordshared.apis.meta.quantity import format_time
from koordshared.kube.client import make_api_client
from koordshared.testing import objects
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.cluster.deschedulerharness import hot_node_config as config
from tests.cluster.deschedulerharness import running_descheduler
from tests.cluster.reporter import FakeReporter

PODS = 101
WORKLOADS = 10
FREE = {"koordinator.sh/priority-class": "koord-free"}
BATCH = {"koordinator.sh/priority-class": "koord-batch"}


def populate(server: APIServer, *, protected: int = 0) -> None:
    """hot: 10 cores, 101 Running pods of 100m in 10 workloads, over two namespaces (10100m: 101 %);
    two cold nodes of 1000 cores. The first ``protected`` pods (koord-free: evicted first) are covered by
    a PodDisruptionBudget that allows no disruption."""
    store = server.store
    store.create("namespaces", {"metadata": {"name": "team-b"}}, keep_status=False)
    store.create("nodes", objects.node("hot", cpu="10", memory="100Gi"))
    for name in ("cold-1", "cold-2"):
        store.create("nodes", objects.node(name, cpu="1000", memory="1000Gi"))
    reported = []
    for i in range(PODS):
        ns = "default" if i % 2 == 0 else "team-b"
        workload = f"rs-{i % WORKLOADS}"
        p = objects.pod(
            f"be-{i:03d}",
            namespace=ns,
            node_name="hot",
            phase="Running",
            labels={**(FREE if i < protected else BATCH), "app": "protected" if i < protected else "batch"},
        )
        p["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": workload,
                "uid": f"{ns}-{workload}",
                "controller": True,
            }
        ]
        p["metadata"]["creationTimestamp"] = format_time(1_700_000_000 + i)
        p["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        store.create("pods", p)
        reported.append((ns, p["metadata"]["name"], 100, 0, ""))
    if protected:
        for ns in ("default", "team-b"):
            store.create(
                "poddisruptionbudgets.policy",
                {
                    "metadata": {"name": "protected", "namespace": ns},
                    "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "protected"}}},
                },
                keep_status=False,
            )
    reporter = FakeReporter(make_api_client(client_configuration=server.client_config()))
    reporter.report("hot", 0, 0, reported)
    for name in ("cold-1", "cold-2"):
        reporter.report(name, 0, 0)


def hot_pods(server: APIServer) -> list[dict[str, Any]]:
    return [p for p in server.store.list("pods")[0] if p["spec"].get("nodeName") == "hot"]


def evicted_names(server: APIServer) -> list[str]:
    return [
        r.path.split("/")[-2]
        for r in server.requests
        if r.method == "POST" and r.path.endswith("/eviction") and r.status == 201
    ]


def wait_gone(server: APIServer, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(hot_pods(server)) > PODS - count:
        assert time.monotonic() < deadline, f"{PODS - len(hot_pods(server))} of {count} evicted pods gone"
        time.sleep(0.01)


@pytest.fixture
def server(api_server_factory: Any) -> APIServer:  # noqa: F811
    return api_server_factory(kubelet_auto_confirm=True)


def test_at_most_two_per_node_by_default_with_an_event_for_each(server: APIServer) -> None:
    populate(server)
    with running_descheduler(server.client_config(), config({"skipCheckExpectedReplicas": True})) as app:
        assert app.run_round() == "ok"
        assert len(evicted_names(server)) == 2
        app.events.flush()
        wait_gone(server, 2)
    events = [e for e in server.store.list("events")[0] if e["reason"] == "Descheduled"]
    assert len(events) == 2
    assert {e["involvedObject"]["name"] for e in events} == set(evicted_names(server))
    # events.k8s.io/v1, as the descheduler's recorder writes them, regarding the listed pods as Pods
    posted = [r for r in server.requests if r.method == "POST" and r.path.endswith("/events")]
    assert {r.path.split("/namespaces/")[0] for r in posted} == {"/apis/events.k8s.io/v1"}
    assert {(e["involvedObject"]["kind"], e["involvedObject"]["apiVersion"]) for e in events} == {
        ("Pod", "v1")
    }
    assert {(e["action"], e["reportingComponent"]) for e in events} == {("Migrating", "koord-descheduler")}
    assert all(e["eventTime"] and e["reportingInstance"].startswith("koord-descheduler-") for e in events)
    # the reason is computed before each eviction, from the usage the earlier ones left
    # MigrationController's note: the node and the reason quoted as Go's %q
    nodes = {e["involvedObject"]["name"]: e for e in events}
    assert sorted(e["message"].split(" by the reason ")[1] for e in nodes.values()) == [
        f'"node is overutilized, node cpu usage({pct})>threshold(1.00%)"' for pct in ("100.00%", "101.00%")
    ]
    assert all(e["message"].startswith('Pod evicted from node "') for e in events)


def test_namespace_global_and_workload_limits_hold(server: APIServer) -> None:
    populate(server)
    limits = {
        "maxMigratingPerNode": 0,  # 0: no per-node limit
        "maxMigratingPerNamespace": 30,
        "maxMigratingGlobally": 40,
        "maxMigratingPerWorkload": "50%",
        "maxUnavailablePerWorkload": "50%",
        "objectLimiters": {},
    }
    with running_descheduler(server.client_config(), config(limits)) as app:
        app.run_round()
        names = evicted_names(server)
    by_ns = {
        ns: sum(1 for n in names if int(n[3:]) % 2 == (0 if ns == "default" else 1))
        for ns in ("default", "team-b")
    }
    by_workload: dict[int, int] = {}
    for n in names:
        by_workload[int(n[3:]) % WORKLOADS] = by_workload.get(int(n[3:]) % WORKLOADS, 0) + 1
    # 10 workloads of 10 or 11 pods (each in one namespace): 50 % is 5 per workload
    assert all(v <= 5 for v in by_workload.values()), by_workload
    assert max(by_ns.values()) <= 30, by_ns
    assert len(names) == 40, "the global limit ends the round"


def test_pdb_refusals_are_skipped_retried_next_round_and_never_forced(server: APIServer) -> None:
    populate(server, protected=20)
    open_limits = {
        "maxMigratingPerNode": 0,
        "skipEvictionGates": ["MaxMigratingPerWorkload", "MaxUnavailablePerWorkload", "ExpectedReplicas"],
        "objectLimiters": {},
    }
    with running_descheduler(server.client_config(), config(open_limits)) as app:
        app.run_round()
        refused = [r for r in server.requests if r.path.endswith("/eviction") and r.status == 429]
        assert len(refused) == 20, "every protected pod was tried (they sort first) and refused"
        names = evicted_names(server)
        assert len(names) == PODS - 20, "the round went on past the refusals: every other pod evicted"
        wait_gone(server, PODS - 20)
        left = hot_pods(server)
        assert len(left) == 20 and all(not p["metadata"].get("deletionTimestamp") for p in left)
        pdb = app.metrics.pods_evicted.get(
            result="pdb", strategy="LowNodeLoad", namespace="default", node="hot"
        )
        assert pdb == 10
        # next round, on a fresh NodeMetric (the protected pods alone still over 1 %): retried, refused
        FakeReporter(make_api_client(client_configuration=server.client_config())).report(
            "hot", 0, 0, [(p["metadata"]["namespace"], p["metadata"]["name"], 100, 0, "") for p in left]
        )
        deadline = time.monotonic() + 5
        while app.informers.node_metrics.get("hot")["status"]["podsMetric"].__len__() != 20:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        app.run_round()
        refused = [r for r in server.requests if r.path.endswith("/eviction") and r.status == 429]
        assert len(refused) == 40
        assert len(hot_pods(server)) == 20


def test_qps_spaces_the_evictions(server: APIServer) -> None:
    populate(server)
    limits = {
        "maxMigratingPerNode": 6,
        "evictQPS": 20,
        "evictBurst": 1,
        "skipCheckExpectedReplicas": True,
        "objectLimiters": {},
    }
    with running_descheduler(server.client_config(), config(limits)) as app:
        app.run_round()
    times = [r for r in server.requests if r.path.endswith("/eviction")]
    assert len(times) == 6
    names = evicted_names(server)
    assert len(names) == 6
    # 6 evictions at 20/s with a burst of 1: at least 5 intervals of 50 ms
    stamps = next(iter(app.metrics.round_duration.collect())).samples
    total = next(s.value for s in stamps if s.name.endswith("_sum"))
    assert total >= 5 / 20


def test_dry_run_evicts_nothing_and_decides_the_same(server: APIServer) -> None:
    populate(server)
    with running_descheduler(
        server.client_config(), config({"skipCheckExpectedReplicas": True}, dry_run=True)
    ) as app:
        assert app.run_round() == "ok"
        assert (
            app.metrics.pods_evicted.get(
                result="dry-run", strategy="LowNodeLoad", namespace="team-b", node="hot"
            )
            + app.metrics.pods_evicted.get(
                result="dry-run", strategy="LowNodeLoad", namespace="default", node="hot"
            )
            == 2
        )
    assert evicted_names(server) == []
    assert not [r for r in server.requests if r.path.endswith("/eviction")]
    assert len(hot_pods(server)) == PODS


def test_a_restarted_descheduler_counts_the_pod_still_terminating(api_server_factory: Any) -> None:  # noqa: F811
    # No kubelet confirms deletions here: an evicted pod stays Terminating.
    server = api_server_factory()
    populate(server)
    limits = {
        "maxMigratingPerNode": 0,
        "maxMigratingPerWorkload": 1,
        "maxUnavailablePerWorkload": "50%",
        "objectLimiters": {},
    }
    with running_descheduler(server.client_config(), config({**limits, "maxMigratingGlobally": 1})) as first:
        first.run_round()
    (evicted,) = evicted_names(server)
    pod = server.store.get("pods", evicted, "default" if int(evicted[3:]) % 2 == 0 else "team-b")
    assert pod["metadata"].get("deletionTimestamp"), "still terminating"
    workload = int(evicted[3:]) % WORKLOADS
    # A new process: its memory of the first eviction is gone, the cluster still shows it under way.
    with running_descheduler(server.client_config(), config(limits)) as second:
        second.run_round()
    again = evicted_names(server)[1:]
    assert again, "the new process evicts from the other workloads"
    assert [n for n in again if int(n[3:]) % WORKLOADS == workload] == []
    by_workload = [int(n[3:]) % WORKLOADS for n in again]
    assert len(by_workload) == len(set(by_workload)), "one pod at a time per workload"
