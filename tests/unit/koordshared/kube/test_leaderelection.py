"""Leader election: acquisition, take-over only after the lease as observed, the leader's deadline on the
monotonic clock (even while its renewing call hangs), conflicts, release; and the wire format on the test
API server (MicroTime with six fractional digits, optimistic concurrency)."""

from __future__ import annotations

import copy
import re
import threading
from collections.abc import Mapping
from typing import Any

import pytest

from koordlet.testing import FakeClock, wait_until
from koordshared.kube.client import ApiError, make_api_client
from koordshared.kube.leaderelection import ElectionConfig, KubeLeaseClient, LeaderElector
from koordshared.runtime.errors import APIUnavailable, ConfigError
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401


class MemoryLeases:
    """One Lease in memory with resourceVersion checks, and an outage switch."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.down = False
        self.writes: list[str] = []

    def _check(self) -> None:
        if self.down:
            raise APIUnavailable("connection refused")

    def get(self, timeout: float) -> Mapping[str, Any] | None:
        self._check()
        return copy.deepcopy(self.lease)

    def _store(self, lease: Mapping[str, Any]) -> Mapping[str, Any]:
        self.rv += 1
        self.lease = copy.deepcopy(dict(lease))
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        self.writes.append(self.lease["spec"]["holderIdentity"])
        return copy.deepcopy(self.lease)

    def create(self, lease: Mapping[str, Any], timeout: float) -> Mapping[str, Any]:
        self._check()
        if self.lease is not None:
            raise ApiError("create", 409, "AlreadyExists", "")
        return self._store(lease)

    def update(self, lease: Mapping[str, Any], timeout: float) -> Mapping[str, Any]:
        self._check()
        assert self.lease is not None
        if lease["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise ApiError("update", 409, "Conflict", "stale")
        return self._store(lease)


def cfg(identity: str, **kw: Any) -> ElectionConfig:
    return ElectionConfig(namespace="ns", name="lock", identity=identity, **kw)


def test_config_is_validated() -> None:
    with pytest.raises(ConfigError):
        ElectionConfig(identity="a", lease_duration=10, renew_deadline=10).validate()
    with pytest.raises(ConfigError):
        ElectionConfig(identity="").validate()
    assert cfg("a").margin == 5.0


def test_takeover_waits_a_full_lease_from_the_observed_renewal() -> None:
    clock, leases = FakeClock(), MemoryLeases()
    a = LeaderElector(cfg("a"), leases, clock=clock, wall_clock=clock.wall)
    b = LeaderElector(cfg("b"), leases, clock=clock, wall_clock=clock.wall)
    assert a.try_acquire_or_renew() and leases.lease is not None
    spec = leases.lease["spec"]
    assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 15
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", spec["renewTime"])
    assert not b.try_acquire_or_renew()  # b observes a's record now
    clock.advance(14.9)
    assert not b.try_acquire_or_renew()
    clock.advance(0.2)
    assert b.try_acquire_or_renew()
    assert leases.lease["spec"]["holderIdentity"] == "b" and leases.lease["spec"]["leaseTransitions"] == 1
    assert b.leader == "b"


def test_a_renewing_leader_keeps_the_lease() -> None:
    clock, leases = FakeClock(), MemoryLeases()
    a = LeaderElector(cfg("a"), leases, clock=clock, wall_clock=clock.wall)
    b = LeaderElector(cfg("b"), leases, clock=clock, wall_clock=clock.wall)
    assert a.try_acquire_or_renew()
    acquired = leases.lease["spec"]["acquireTime"]  # type: ignore[index]
    for _ in range(20):
        clock.advance(2.0)
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()
    assert leases.lease["spec"]["acquireTime"] == acquired  # type: ignore[index]
    assert leases.lease["spec"]["leaseTransitions"] == 0  # type: ignore[index]


def test_leadership_ends_at_the_deadline_even_while_the_renewal_hangs() -> None:
    clock = FakeClock()
    leases = MemoryLeases()
    a = LeaderElector(cfg("a"), leases, clock=clock, wall_clock=clock.wall)
    assert a.try_acquire_or_renew() and not a.is_leader()  # holding the lease is not leading yet
    stop = threading.Event()
    t = threading.Thread(target=a.run, args=(stop,), name="test-elector-deadline")
    t.start()
    try:
        assert wait_until(a.is_leader, 5)  # run() renewed at fake time 1000: leading until 1010
        # The server goes away; nobody renews (the loop's renewals fail, and the fake clock does not
        # move for it). The deadline alone decides.
        leases.down = True
        clock.advance(9.9)
        assert a.is_leader()
        clock.advance(0.2)
        assert not a.is_leader()
        assert not a.try_acquire_or_renew()
    finally:
        stop.set()
        t.join(5)
    assert not t.is_alive()


def test_run_loses_the_lead_in_time_and_campaigns_again() -> None:
    leases = MemoryLeases()
    events: list[str] = []
    a = LeaderElector(
        cfg("a", lease_duration=1.5, renew_deadline=1.0, retry_period=0.2),
        leases,
        on_started_leading=lambda: events.append("start"),
        on_stopped_leading=lambda: events.append("stop"),
    )
    stop = threading.Event()
    t = threading.Thread(target=a.run, args=(stop,), name="test-elector")
    t.start()
    try:
        assert wait_until(a.is_leader, 5)
        leases.down = True
        lost = wait_until(lambda: not a.is_leader(), 5)
        assert lost and lost.seconds <= 1.0 + 0.1  # never past renew_deadline after the last renewal
        assert wait_until(lambda: events[-1:] == ["stop"], 3)
        leases.down = False
        assert wait_until(a.is_leader, 5)  # our own lease: re-acquired at once, no wait for expiry
        assert events == ["start", "stop", "start"]
    finally:
        stop.set()
        t.join(5)
    assert not t.is_alive()
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == ""  # released on stop


def test_two_electors_on_the_test_api_server(api_server: APIServer) -> None:  # noqa: F811
    api_server.store.create(
        "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}
    )
    clients = [
        make_api_client(client_configuration=api_server.client_config(), user_agent=f"e{i}") for i in (0, 1)
    ]
    config = {"lease_duration": 1.5, "renew_deadline": 1.0, "retry_period": 0.2}
    electors = [
        LeaderElector(cfg(f"e{i}", **config), KubeLeaseClient(c, "ns", "lock")) for i, c in enumerate(clients)
    ]
    stops = [threading.Event(), threading.Event()]
    threads = [
        threading.Thread(target=e.run, args=(s,), name=f"test-elector-{i}")
        for i, (e, s) in enumerate(zip(electors, stops, strict=True))
    ]
    for t in threads:
        t.start()
    try:
        assert wait_until(lambda: any(e.is_leader() for e in electors), 10)
        first = next(i for i, e in enumerate(electors) if e.is_leader())
        other = 1 - first
        # Once the other has read the leader's lease it cannot take it before the lease runs out.
        assert wait_until(lambda: electors[other].leader == f"e{first}", 5)
        assert sum(e.is_leader() for e in electors) == 1
        stops[first].set()  # graceful stop releases: the other takes over without waiting a lease
        threads[first].join(5)
        took_over = wait_until(electors[other].is_leader, 5)
        assert took_over and took_over.seconds < 1.5
        lease = api_server.store.get("leases", "lock", "ns")
        assert lease["spec"]["holderIdentity"] == f"e{other}"
        assert lease["spec"]["leaseTransitions"] >= 1
        micro = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
        puts = [r for r in api_server.requests if r.method in ("PUT", "POST") and "/leases" in r.path]
        assert puts and all(micro.fullmatch(r.body["spec"]["renewTime"]) for r in puts)
        assert {r.headers.get("User-Agent") for r in puts} == {"e0", "e1"}
    finally:
        for s in stops:
            s.set()
        for t in threads:
            t.join(5)
        for c in clients:
            c.close()
