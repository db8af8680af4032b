"""The real ``koord-scheduler`` process holds its requests to ``clientConnection``'s qps/burst, as
kube-scheduler's client-go token bucket does: a backlog drains no faster than the configured rate allows.
The bindings are timed as the test API server commits them (an upper bound on the rate: a slow machine
only makes it lower)."""

from __future__ import annotations

import threading
import time

from koordlet.testing.wait import wait_until
from tests.apiserver import APIServer
from tests.apiserver.watch import WatchEvent
from tests.cluster.koordscheduler import Cluster, configuration
from tests.integration.koordscheduler_env import Start

PODS = 30
QPS, BURST = 10, 5


class BindingTimes:
    """When each binding was committed (monotonic seconds, in commit order)."""

    def __init__(self, server: APIServer) -> None:
        self.times: list[float] = []
        self._lock = threading.Lock()
        server.store.add_listener(self._on_write)

    def _on_write(self, event: WatchEvent) -> None:
        if event.key != ("", "pods") or event.type != "MODIFIED" or event.old is None:
            return
        if event.obj["spec"].get("nodeName") and not event.old["spec"].get("nodeName"):
            with self._lock:
                self.times.append(time.monotonic())

    def count(self) -> int:
        with self._lock:
            return len(self.times)


def test_the_configured_qps_and_burst_limit_the_bindings(
    api_server: APIServer, cluster: Cluster, schedulers: Start
) -> None:
    cluster.node("n1", cpu="64")
    for i in range(PODS):
        cluster.pod(f"p{i}", cpu="10m")
    times = BindingTimes(api_server)
    schedulers(configuration({}, clientConnection={"qps": QPS, "burst": BURST}))
    assert wait_until(lambda: times.count() == PODS, 60, step=0.05), times.count()
    t = times.times
    # Whatever the bucket had left after the lists and watches, any k bindings in a row span at least
    # (k - burst) / qps seconds (a token a binding, one more at most in flight at each end).
    worst = max((j - i + 1) - (BURST + QPS * (t[j] - t[i])) for i in range(len(t)) for j in range(i, len(t)))
    assert worst <= 1.0, f"{worst:.1f} bindings over the limit; span {t[-1] - t[0]:.2f}s"
    assert t[-1] - t[0] >= (PODS - BURST - 1) / QPS - 0.05
