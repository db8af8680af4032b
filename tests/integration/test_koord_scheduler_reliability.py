"""koord-scheduler never binds a pod twice, or to a node that cannot hold it, because of its own
bookkeeping: shown on the real process against the test API server under concurrent pod and node churn,
caches listed slower than the sync timeout, a node deleted during binding, an API outage with a 410
re-list, a binding the watch never showed, and a pod deleted while it waits on Permit. Every binding is
audited the moment the server commits it (:class:`~tests.cluster.koordscheduler.BindingAudit`). Leader
handovers are in ``test_koord_scheduler_leader.py``."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

from koord.scheduler.framework.types import PodInfo
from koordlet.testing.wait import wait_until
from koordshared.kube.client import ApiError
from koordshared.testing import objects
from tests.apiserver import APIServer
from tests.apiserver.watch import WatchEvent
from tests.cluster.koordscheduler import (
    BindingAudit,
    Cluster,
    bindings,
    calls,
    configuration,
    events_for,
    node_of,
)
from tests.integration.koordscheduler_env import Start, holding, profile

HOLD = {"points.test/hold": "1"}


def bound(server: APIServer, name: str, timeout: float = 30.0) -> str:
    assert wait_until(lambda: node_of(server, name), timeout, step=0.05), f"{name} not bound in {timeout}s"
    return node_of(server, name)


def held(trace: Path, name: str) -> bool:
    return bool(calls(trace, "preBind", f"default/{name}", "held"))


def test_concurrent_pod_and_node_churn_never_overcommits_or_binds_twice(
    api_server: APIServer, schedulers: Start
) -> None:
    audit = BindingAudit(api_server)
    nodes = [f"c{i}" for i in range(6)]
    setup = Cluster(api_server)
    for n in nodes:
        setup.node(n, cpu="4")
    ks = schedulers()
    rng = random.Random(24)
    created: list[str] = []
    stop = threading.Event()
    lock = threading.Lock()
    errors: list[str] = []

    def creator(c: Cluster) -> None:
        i = 0
        while not stop.is_set():
            c.pod(f"p{i}", cpu=rng.choice(("100m", "250m", "500m")))
            with lock:
                created.append(f"p{i}")
            i += 1
            stop.wait(0.03)

    def deleter(c: Cluster) -> None:
        while not stop.wait(0.08):
            with lock:
                victim = rng.choice(created) if created else None
            if victim is not None:
                try:
                    c.delete_pod(victim)
                except ApiError as err:
                    if not err.not_found:
                        raise
                with lock:
                    created.remove(victim)

    def node_churn(c: Cluster) -> None:
        present = set(nodes)
        while not stop.wait(0.4):
            name = rng.choice(nodes)
            if name in present and len(present) > 2:
                c.delete_node(name)
                present.discard(name)
            elif name not in present:
                c.node(name, cpu="4")
                present.add(name)

    def run(fn: object) -> None:
        c = Cluster(api_server)
        try:
            fn(c)  # type: ignore[operator]
        except Exception as err:
            errors.append(repr(err))
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(f,)) for f in (creator, deleter, node_churn)]
    for t in threads:
        t.start()
    time.sleep(6)  # the churn's length, not a wait for anything: the checks below poll
    stop.set()
    for t in threads:
        t.join(30)
    assert not errors, errors
    for n in nodes:
        if not api_server.store.exists("nodes", n):
            setup.node(n, cpu="4")
    left = [p["metadata"]["name"] for p in api_server.store.list("pods")[0]]
    # room for every pod left (what the churn left may fill the nodes), and node events for the
    # pods that found none
    requested = sum(PodInfo(p).requests.get("cpu", 0) for p in api_server.store.list("pods")[0])
    for i in range(requested // 4000 + 1):
        setup.node(f"extra-{i}", cpu="4")
    setup.close()
    assert len(left) > 20, "the churn left too few pods to say anything"
    if not wait_until(lambda: all(node_of(api_server, n) for n in left), 90, step=0.2):
        stuck = [n for n in left if not node_of(api_server, n)]
        queues = {q: ks.metric("scheduler_pending_pods", queue=q) for q in ("active", "backoff", "gated")}
        lines = [line for line in ks.log().splitlines() if any(f"default/{n}" in line for n in stuck)]
        cache = {t: ks.metric("scheduler_cache_size", type=t) for t in ("nodes", "pods", "assumed_pods")}
        real = sum(1 for p in api_server.store.list("pods")[0] if p["spec"].get("nodeName"))
        explain = ks.get(f"/debug/explain?pod=default/{stuck[0]}")[1]
        raise AssertionError(
            f"not bound: {stuck}; queue {queues}; cache {cache}, {real} pods bound\n{explain}\n"
            + "\n".join(lines[-30:])
        )
    assert ks.alive()
    assert not audit.violations, audit.violations
    assert set(audit.bound.values()) == {1}
    refused = [r.path for r in api_server.requests if r.path.endswith("/binding") and r.status == 409]
    assert not refused, f"bindings of pods already bound (the server refused them): {refused}"
    print(f"{len(audit.bound)} bindings audited, {len(audit.to_missing)} to a node deleted in between")


def test_nothing_is_scheduled_from_a_pod_cache_not_yet_synced(
    api_server: APIServer, cluster: Cluster, schedulers: Start
) -> None:
    """Past ``--sync-timeout`` the process keeps waiting for its caches, as kube-scheduler's
    ``WaitForCacheSync`` does: a pod cache partly listed hides the pods already on a node."""
    cluster.node("n", cpu="2")
    cluster.pod("running", cpu="1500m", nodeName="n")
    cluster.pod("p", cpu="1")
    api_server.fail_next(4, 403, method="GET", path_contains="/api/v1/pods")  # the lists refused 4 times
    ks = schedulers(None, "--sync-timeout=0.2s", ready=False)
    assert wait_until(lambda: "informers has not synced after" in ks.log(), 30, step=0.05), ks.log()
    assert "still waiting" in ks.log() and "going on" not in ks.log()
    assert ks.get("/readyz")[0] == 503 and not bindings(api_server, None)
    assert ks.ready(30), ks.log()
    assert wait_until(lambda: events_for(api_server, "p", "FailedScheduling"), 10, step=0.05)
    assert node_of(api_server, "p") == "" and not bindings(api_server, None)


def test_a_node_deleted_during_binding_gets_no_pod(
    api_server: APIServer, cluster: Cluster, schedulers: Start, tmp_path: Path
) -> None:
    trace, release, config = holding(tmp_path)
    audit = BindingAudit(api_server)
    cluster.node("doomed")
    ks = schedulers(configuration(config))
    cluster.pod("p", labels=HOLD)
    assert wait_until(lambda: held(trace, "p"), 30, step=0.05)
    cluster.delete_node("doomed")
    assert ks.wait_metric("scheduler_cache_size", 0, type="nodes")  # the scheduler saw it go
    (release / "p").touch()
    assert wait_until(lambda: calls(trace, "unreserve", "default/p"), 30, step=0.05)
    assert wait_until(lambda: events_for(api_server, "p", "FailedScheduling"), 10, step=0.05)
    message = events_for(api_server, "p", "FailedScheduling")[0]["message"]
    assert message == "node doomed was deleted while the pod was being bound"
    cluster.node("fresh")
    assert bound(api_server, "p") == "fresh"
    assert not audit.to_missing and bindings(api_server, None) == [("default/p", "fresh")]


def test_an_api_outage_and_a_410_relist_lose_nothing_and_bind_nothing_twice(
    api_server: APIServer, cluster: Cluster, schedulers: Start, tmp_path: Path
) -> None:
    trace, release, config = holding(tmp_path)
    audit = BindingAudit(api_server)
    api_server.store.create("namespaces", {"metadata": {"name": "koordinator-system"}}, keep_status=False)
    cluster.node("n1", cpu="2")
    ks = schedulers(configuration(config), elect=True)
    assert wait_until(lambda: lease_holder(api_server), 30, step=0.05)
    cluster.pod("old", cpu="1")
    assert bound(api_server, "old") == "n1"
    cluster.pod("early", cpu="1", labels=HOLD)
    assert wait_until(lambda: held(trace, "early"), 30, step=0.05)

    api_server.down()
    (release / "early").touch()  # its binding is sent into the outage and fails
    assert wait_until(lambda: calls(trace, "unreserve", "default/early"), 10, step=0.05)
    store = api_server.store
    store.delete("pods", "old", "default", grace_period_seconds=0)  # its room is free again
    for name in ("b", "c"):
        pod = objects.pod(name, requests={"cpu": "1"}, scheduler_name="koord-scheduler")
        del pod["metadata"]["uid"]
        store.create("pods", pod, keep_status=False)
    store.create("nodes", objects.node("n2", cpu="2"))
    store.compact()  # the watches' resourceVersions are gone: a 410, then a re-list
    seen = len(api_server.requests)
    api_server.up()

    for name in ("early", "b", "c"):
        assert bound(api_server, name, 60) in ("n1", "n2")
    relists = [
        r for r in api_server.requests[seen:] if r.path == "/api/v1/pods" and r.query.get("watch") != "true"
    ]
    assert relists, "the scheduler did not re-list the pods after the 410"
    assert node_of(api_server, "old") == ""
    assert not audit.violations and set(audit.bound.values()) == {1}
    assert sorted(k for k, _ in bindings(api_server)) == [
        "default/b",
        "default/c",
        "default/early",
        "default/old",
    ]
    assert ks.alive(), "a 3-second outage is within the renew deadline: the leader stays"
    assert ks.stop() == 0


def test_a_binding_the_watch_never_showed_frees_its_room_when_the_pod_goes(
    api_server: APIServer, cluster: Cluster, schedulers: Start, tmp_path: Path
) -> None:
    """The pod is bound while the scheduler's watches are cut, and deleted at once with the history
    compacted (in the same store transaction as the binding): the re-list after the 410 reports only
    the deletion of the pod as the scheduler last saw it, unbound."""
    trace, release, config = holding(tmp_path)
    cluster.node("n1", cpu="2")
    ks = schedulers(configuration(config))
    cluster.pod("ghost", cpu="2", labels=HOLD)
    assert wait_until(lambda: held(trace, "ghost"), 30, step=0.05)
    store = api_server.store

    def vanish_once_bound(event: WatchEvent) -> None:  # under the store's lock: no watch sees between
        obj, was = event.obj, (event.old or {}).get("spec", {})
        ghost = event.key == ("", "pods") and obj["metadata"]["name"] == "ghost"
        if ghost and event.type == "MODIFIED" and obj["spec"].get("nodeName") and not was.get("nodeName"):
            store.delete("pods", "ghost", "default", grace_period_seconds=0)
            store.compact()

    store.add_listener(vanish_once_bound)
    store.close_watchers()  # watches end, and new ones end at once after replaying what they missed
    (release / "ghost").touch()
    assert wait_until(lambda: not store.exists("pods", "ghost", "default"), 30, step=0.05)
    assert bindings(api_server) == [("default/ghost", "n1")]
    seen = len(api_server.requests)
    store.open_watches()
    assert wait_until(
        lambda: any(r.path == "/api/v1/pods" and "watch" not in r.query for r in api_server.requests[seen:]),
        30,
        step=0.05,
    ), "no re-list after the 410"
    assert ks.wait_metric("scheduler_cache_size", 0, type="pods")
    cluster.pod("next", cpu="2")
    assert bound(api_server, "next") == "n1"


def test_a_pod_deleted_while_waiting_on_permit_is_unreserved_and_never_bound(
    api_server: APIServer, cluster: Cluster, schedulers: Start, tmp_path: Path
) -> None:
    trace = tmp_path / "trace"
    cluster.node("n1")
    config = profile(trace, {"permit": ["Pair"], "reserve": ["Recorder"]}, {"Pair": {"timeout": 60}})
    ks = schedulers(configuration(config))
    cluster.pod("waiting", labels={"points.test/pair": "w"})
    assert wait_until(lambda: calls(trace, "permit", "default/waiting", "wait"), 30, step=0.05)
    assert ks.wait_metric("scheduler_cache_size", 1, type="assumed_pods")
    cluster.delete_pod("waiting")
    assert wait_until(lambda: calls(trace, "unreserve", "default/waiting"), 10, step=0.05)
    assert ks.wait_metric("scheduler_cache_size", 0, type="assumed_pods")
    cluster.pod("partner", labels={"points.test/pair": "w"})
    assert wait_until(lambda: calls(trace, "permit", "default/partner"), 30, step=0.05)
    assert [c["result"] for c in calls(trace, "permit", "default/partner")] == ["wait"]  # no one to allow
    assert not bindings(api_server, None)
    assert not events_for(api_server, "waiting", "FailedScheduling")


def lease_holder(server: APIServer) -> str:
    try:
        lease = server.store.get("leases", "koord-scheduler", "koordinator-system")
    except Exception:
        return ""
    return str(lease["spec"].get("holderIdentity") or "")
