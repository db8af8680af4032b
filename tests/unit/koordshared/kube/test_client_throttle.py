"""A client's token bucket (clientConnection qps/burst): every request through it, typed list calls and
raw writes alike, waits its turn; a twin client keeps its own pace. Counted on the test API server over
a fake clock that only the waits move."""

from __future__ import annotations

import threading

from koordshared.apis.meta import groups
from koordshared.kube.client import make_api_client, request, throttle, twin_client
from koordshared.kube.informers import Watch, list_call
from koordshared.kube.ratelimit import TokenBucket
from koordshared.testing.clock import FakeClock
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401


class Waits:
    """A ``sleep`` that moves the fake clock instead of the thread."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.slept: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, seconds: float) -> None:
        with self._lock:
            self.slept.append(seconds)
            self.clock.advance(seconds)


def test_requests_are_held_to_qps_after_the_burst(api_server: APIServer) -> None:  # noqa: F811
    clock = FakeClock()
    waits = Waits(clock)
    client = make_api_client(client_configuration=api_server.client_config())
    throttle(client, TokenBucket(10.0, 5, clock), waits)
    start = clock()
    fn, kwargs = list_call(client, Watch("nodes", groups.NODES))
    for i in range(15):
        if i % 2:
            fn(**kwargs, _preload_content=False)
        else:
            request(client, "ns get", "GET", "/api/v1/namespaces/default")
    # 5 at once (the burst), then one every 1/qps: 10 more take 1 s of the fake clock.
    assert len(waits.slept) == 10
    assert abs((clock() - start) - 1.0) < 1e-6
    paths = ("/api/v1/nodes", "/api/v1/namespaces/default")
    assert sum(1 for r in api_server.requests if r.path in paths) == 15
    client.close()


def test_a_twin_client_keeps_its_own_bucket(api_server: APIServer) -> None:  # noqa: F811
    clock = FakeClock()
    waits = Waits(clock)
    client = make_api_client(client_configuration=api_server.client_config(), user_agent="koord-test/1")
    twin = twin_client(client)
    throttle(client, TokenBucket(1.0, 1, clock), waits)
    for _ in range(3):
        request(twin, "ns get", "GET", "/api/v1/namespaces/default")
    assert waits.slept == []
    request(client, "ns get", "GET", "/api/v1/namespaces/default")
    request(client, "ns get", "GET", "/api/v1/namespaces/default")
    assert waits.slept == [1.0]
    agents = {r.headers.get("User-Agent") or r.headers.get("user-agent") for r in api_server.requests}
    assert agents == {"koord-test/1"}
    client.close()
    twin.close()
