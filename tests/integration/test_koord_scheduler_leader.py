"""Two real ``koord-scheduler`` replicas on one Lease, the leader caught in the middle of a binding (its
PreBind held by the process-test plugin ``Hold``): whether it stops gracefully or loses its Lease, it sends
no binding after the new leader starts, and the pod is bound once, by the new leader."""

from __future__ import annotations

import signal
from pathlib import Path

from koordlet.testing.wait import wait_until
from tests.apiserver import APIServer, Request
from tests.cluster.koordscheduler import Cluster, KoordSchedulerProcess, calls, configuration, node_of
from tests.integration.koordscheduler_env import Start, holding

NS, LEASE = "koordinator-system", "koord-scheduler"
# Short leases for the test: a request times out (1.5 s) before the lease could pass to the other replica
# (6 s after the last renewal, which the holder must repeat within 4 s).
ELECTION = (
    "--leader-elect-lease-duration=6s",
    "--leader-elect-renew-deadline=4s",
    "--leader-elect-retry-period=0.5s",
    "--request-timeout=1.5s",
)


def lease_holder(server: APIServer) -> str:
    try:
        lease = server.store.get("leases", LEASE, NS)
    except Exception:
        return ""
    return str(lease["spec"].get("holderIdentity") or "")


def by(replica: str, r: Request) -> bool:
    return f"({replica})" in r.headers.get("User-Agent", "")


def writes(server: APIServer, replica: str) -> list[tuple[int, Request]]:
    """The replica's writes that change scheduling state, with their place in the request log."""
    return [
        (i, r)
        for i, r in enumerate(server.requests)
        if by(replica, r) and r.method in ("POST", "PATCH", "PUT", "DELETE") and "/events" not in r.path
    ]


def acquired(server: APIServer, replica: str) -> int:
    """Where in the request log ``replica`` first wrote the Lease as its holder."""
    return next(
        i
        for i, r in writes(server, replica)
        if "/leases" in r.path and r.status in (200, 201) and r.body["spec"]["holderIdentity"] == replica
    )


def two_replicas(
    server: APIServer, cluster: Cluster, schedulers: Start, tmp_path: Path
) -> tuple[KoordSchedulerProcess, KoordSchedulerProcess, Path, Path]:
    """Replica ``a`` leading, ``b`` following; the pod ``held`` caught in ``a``'s PreBind."""
    trace, release, held = holding(tmp_path)
    server.store.create("namespaces", {"metadata": {"name": NS}}, keep_status=False)
    cluster.node("n1", cpu="4")
    config = configuration(held)
    a = schedulers(config, *ELECTION, "--leader-elect-identity=a", name="a", elect=True)
    assert wait_until(lambda: lease_holder(server) == "a", 30, step=0.05)
    b = schedulers(config, *ELECTION, "--leader-elect-identity=b", name="b", elect=True)
    cluster.pod("before")
    assert wait_until(lambda: node_of(server, "before"), 30, step=0.05)
    cluster.pod("held", labels={"points.test/hold": "1"})
    assert wait_until(lambda: calls(trace, "preBind", "default/held", "held"), 30, step=0.05)
    assert calls(trace, "preBind", "default/held", "held")[0]["pid"] == a.proc.pid
    return a, b, trace, release


def check_handover(server: APIServer) -> None:
    """``held`` bound once, by ``b``; every write of ``a`` before ``b`` took the Lease."""
    assert wait_until(lambda: node_of(server, "held") == "n1", 30, step=0.05)
    bindings = [r for r in server.requests if r.path.endswith("/pods/held/binding")]
    assert [(by("b", r), r.status) for r in bindings] == [(True, 201)], [
        (r.headers, r.status) for r in bindings
    ]
    start = acquired(server, "b")
    late = [(r.method, r.path) for i, r in writes(server, "a") if i > start]
    assert not late, f"the old leader wrote after the new one took the Lease: {late}"
    assert any(r.path.endswith("/pods/before/binding") for _, r in writes(server, "a"))


def test_a_leader_stopped_mid_binding_hands_over_after_its_last_write(
    api_server: APIServer, cluster: Cluster, schedulers: Start, tmp_path: Path
) -> None:
    a, b, trace, release = two_replicas(api_server, cluster, schedulers, tmp_path)
    a.proc.send_signal(signal.SIGTERM)
    assert wait_until(lambda: lease_holder(api_server) == "b", 30, step=0.05), a.log()[-2000:]
    (release / "held").touch()  # a's binding thread wakes up now, after b leads
    check_handover(api_server)
    assert a.stop(signal_it=False) == 0, a.log()[-3000:]
    assert wait_until(lambda: calls(trace, "preBind", "default/held", "released"), 10, step=0.05)
    assert b.alive()


def test_a_leader_that_loses_its_lease_mid_binding_binds_nothing_more(
    api_server: APIServer, cluster: Cluster, schedulers: Start, tmp_path: Path
) -> None:
    a, b, _, release = two_replicas(api_server, cluster, schedulers, tmp_path)
    # the leader's renewals fail (b only reads the Lease while it is fresh); the rest of the API works
    api_server.fail_next(16, 500, method="PUT", path_contains=f"/leases/{LEASE}")
    assert wait_until(lambda: "leadership lost" in a.log(), 30, step=0.05), a.log()[-2000:]
    assert wait_until(lambda: lease_holder(api_server) == "b", 60, step=0.05)
    (release / "held").touch()
    check_handover(api_server)
    assert a.stop(signal_it=False) == 1  # "leaderelection lost": exit non-zero, restart as a follower
    assert b.alive()
