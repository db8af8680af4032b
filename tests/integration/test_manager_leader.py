"""Two real koord-manager processes electing a leader on a Lease of the test API server.

SIGKILL of the leader: the standby takes over within the lease duration (plus its polling period) and
writes only after the old leader's last write. The API server refusing connections for longer than the
lease: the leader stops acting within its renew deadline (before the lease could pass to anyone), and
after the outage every write comes from the replica holding the lease. Writers are told apart by the
User-Agent each process sends (``koord-manager/<version> (<identity>)``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.apiserver import APIServer, Request
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.managerharness import (
    NS,
    ManagerProcess,
    ensure_namespace,
    get,
    node,
    set_config,
    wait_until,
)

LEASE, RENEW, RETRY = 3.0, 2.0, 0.5
ELECTION = (
    f"--leader-elect-lease-duration={LEASE}s",
    f"--leader-elect-renew-deadline={RENEW}s",
    f"--leader-elect-retry-period={RETRY}s",
    "--request-timeout=0.5s",
)
_UA = re.compile(r"^koord-manager/\S+ \((?P<identity>[^)]*)\)$")


def writer(r: Request) -> str | None:
    """The identity of the manager that sent a write to a NodeMetric/NodeSLO/Node (not the Lease)."""
    if r.method == "GET" or "/leases" in r.path or "/events" in r.path:
        return None
    m = _UA.match(r.headers.get("User-Agent", ""))
    return m.group("identity") if m else None


def writers(requests: list[Request]) -> list[str]:
    return [w for r in requests if (w := writer(r)) is not None]


def holder(server: APIServer) -> str | None:
    lease = get(server, "leases", "koordinator-manager", NS)
    return None if lease is None else lease["spec"].get("holderIdentity")


def has_objects(server: APIServer, name: str) -> bool:
    return get(server, "nodemetrics", name) is not None and get(server, "nodeslos", name) is not None


@pytest.fixture
def cluster(api_server: APIServer) -> APIServer:  # noqa: F811
    ensure_namespace(api_server)
    set_config(api_server, colocation_config={"enable": True})
    for i in range(10):
        api_server.store.create("nodes", node(f"n{i}"))
    return api_server


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[list[ManagerProcess]]:
    started: list[ManagerProcess] = []
    yield started
    for p in started:
        p.stop()


def start(procs: list[ManagerProcess], tmp: Path, server: APIServer, identity: str) -> ManagerProcess:
    p = ManagerProcess(tmp, server, identity, *ELECTION)
    procs.append(p)
    p.wait_ready()
    return p


@pytest.mark.slow
def test_sigkill_of_the_leader_hands_over_within_the_lease(
    cluster: APIServer, procs: list[ManagerProcess], tmp_path: Path
) -> None:
    a = start(procs, tmp_path, cluster, "a")
    wait_until(a.is_leader, 10, "a leads")
    wait_until(lambda: all(has_objects(cluster, f"n{i}") for i in range(10)), 10, "a created the objects")
    b = start(procs, tmp_path, cluster, "b")
    time.sleep(2 * RETRY)
    assert a.is_leader() and not b.is_leader() and holder(cluster) == "a"

    a.kill()
    killed = time.monotonic()
    cluster.store.create("nodes", node("after-kill"))
    wait_until(b.is_leader, LEASE + 5, "b leads")
    handover = time.monotonic() - killed
    assert handover <= LEASE + 2 * RETRY + 0.5, f"hand-over took {handover:.2f}s"
    wait_until(lambda: has_objects(cluster, "after-kill"), 5, "b reconciles")
    assert holder(cluster) == "b"
    # The server logs a request after answering it: wait for b's writes to be in the log.
    cluster.wait_for_requests(lambda r: writer(r) == "b", count=2, timeout=5)

    seq = writers(cluster.requests)
    assert "a" in seq and "b" in seq
    first_b = seq.index("b")
    assert "a" not in seq[first_b:], "the old leader wrote after the new one started"


@pytest.mark.slow
def test_api_server_outage_longer_than_the_lease_stops_the_leader_in_time(
    cluster: APIServer, procs: list[ManagerProcess], tmp_path: Path
) -> None:
    a = start(procs, tmp_path, cluster, "a")
    wait_until(a.is_leader, 10, "a leads")
    b = start(procs, tmp_path, cluster, "b")
    wait_until(lambda: all(has_objects(cluster, f"n{i}") for i in range(10)), 10, "a created the objects")

    cluster.down()
    down_at = time.monotonic()
    stopped = wait_until(lambda: not a.is_leader(), LEASE + 2, "a stops leading") + 0.0
    # The leader's deadline counts from the start of its last renewal, which was at most one retry
    # period before the outage; anyone else may take over a full lease after observing that renewal.
    assert stopped <= RENEW + 0.3, f"a led {stopped:.2f}s into the outage (renew deadline {RENEW}s)"
    assert stopped < LEASE
    assert not b.is_leader()
    for i in range(3):
        cluster.store.create("nodes", node(f"during-outage-{i}"))  # work for whoever leads next
    time.sleep(max(LEASE + 1.0 - (time.monotonic() - down_at), 0.0))
    mark = len(cluster.requests)
    cluster.up()

    wait_until(lambda: all(has_objects(cluster, f"during-outage-{i}") for i in range(3)), 15, "caught up")
    leader = holder(cluster)
    assert leader in ("a", "b")
    after = writers(cluster.requests[mark:])
    assert after and set(after) == {leader}, (
        f"writes after the outage from {set(after)}, lease held by {leader}"
    )
    assert [p.is_leader() for p in (a, b)].count(True) == 1
