"""A real Prometheus scrapes the advisor's exposition (the pre-rendered ``/metrics`` of the agent's HTTP
server, which Prometheus asks for gzip-compressed): PromQL returns the test container's CPU series, and
``promtool check metrics`` accepts the served text.

The container is a real cgroup under a unique ``koordlet-e2e-*`` parent with a busy process; Prometheus
(:mod:`tests.support.prometheus`) runs on loopback with a temp config and data dir and is killed at the end.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor.advisor import AdvisorConfig, MetricsAdvisor
from koordlet.system.cgroups import CgroupMode
from koordlet.system.host import Host
from koordlet.system.paths import HostPaths
from koordlet.system.podpath import CgroupDriver
from koordlet.testing import FakeStates, wait_until
from koordlet.testing.agent import get_json
from koordlet.testing.cgroups import RealKubepods
from koordshared.runtime.eventbus import EventBus
from koordshared.runtime.httpserver import ProcessHTTPServer
from koordshared.runtime.lifecycle import Supervisor, wait_for
from tests.support.prometheus import prometheus

pytestmark = [pytest.mark.root, pytest.mark.tool("prometheus", "promtool"), pytest.mark.timeout(120)]


def test_promql_returns_the_container_cpu_series(kubepods: RealKubepods) -> None:
    kp = kubepods
    pod = kp.add_pod(api.KubeQOSClass.BESTEFFORT)
    container = kp.add_container(pod)
    kp.busy(container, duty=0.3)
    host = Host(HostPaths(cgroup_parent=kp.parent), CgroupMode.V1, CgroupDriver.CGROUPFS)
    registry = CollectorRegistry()
    cache = MetricCache()
    states = FakeStates(pods=[pod.info()])
    config = AdvisorConfig(node_name="test-node", collect_interval=0.5, psi_interval=1.0)
    advisor = MetricsAdvisor(config, host, cache, states, EventBus(), registry)
    stop = threading.Event()
    supervisor = Supervisor(stop)
    assert advisor.exposition is not None
    exposition = advisor.exposition
    server = ProcessHTTPServer("127.0.0.1", 0, registry)
    server.route("/metrics", exposition.route)
    server.start()
    try:
        advisor.start(stop, supervisor)
        assert wait_for(advisor.has_synced, stop, timeout=15.0)
        series = f'container_id="{container.container_id}"'.encode()
        text = b""

        def exported() -> bool:
            nonlocal text
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as resp:
                text = resp.read()
            return series in text

        # the first scrape renders in place (nobody scraped before); later ones are rendered ahead
        assert wait_until(exported, 10.0, step=0.1), "the container series never reached /metrics"
        assert exposition.renders > 0
        check = subprocess.run(
            ["promtool", "check", "metrics"], input=text, capture_output=True, timeout=30, check=False
        )
        assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()
        with prometheus({"koordlet": [(f"127.0.0.1:{server.port}", {})]}) as base:
            query = (
                f'koordlet_container_resource_usage{{container_id="{container.container_id}",'
                f'resource="cpu",node="test-node"}}'
            )
            url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": query})
            result: list[Any] = []

            def answered() -> bool:
                with contextlib.suppress(OSError, ValueError, AssertionError):
                    body = get_json(url)
                    if body.get("status") == "success":
                        result[:] = body["data"]["result"]
                return bool(result)

            assert wait_until(answered, 45.0, step=0.5), "Prometheus never returned the container CPU series"
            metric = result[0]["metric"]
            assert metric["pod_uid"] == pod.uid
            assert metric["pod_namespace"] == "default"
            assert metric["unit"] == "core"
            assert 0.0 < float(result[0]["value"][1]) < 1.0
    finally:
        stop.set()
        supervisor.join(time.monotonic() + 5.0)
        advisor.shutdown()
        server.shutdown()
