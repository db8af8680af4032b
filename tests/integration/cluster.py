"""The cluster the states informer tests run against: the in-repo API server, a fake kubelet, a fake
host tree and an informer wired to them (the ``cluster_factory`` fixture builds them and stops them)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.statesinformer.config import InformerConfig
from koordlet.statesinformer.informer import StatesInformer
from koordlet.system.host import Host
from koordlet.testing.kubelet import FakeKubelet, pod_object
from koordshared.runtime.eventbus import EventBus
from koordshared.runtime.lifecycle import Supervisor
from tests.apiserver import APIServer

NODE = "node-1"
UIDS = [f"00000000-0000-4000-8000-00000000000{i}" for i in range(1, 4)]
NEVER = threading.Event()
OUTAGE_SECONDS = float(os.environ.get("KOORDLET_TEST_OUTAGE_SECONDS", "60"))
"""The brief asks for a 60 s outage; set lower to iterate faster."""


def node_obj(kubelet_port: int = 10250) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "kubernetes.io/batch-cpu": "3000"},
            "allocatable": {
                "cpu": "3800m",
                "memory": "7Gi",
                "kubernetes.io/batch-cpu": "2000",
                "kubernetes.io/batch-memory": "2Gi",
            },
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
        },
    }


def pods_on(node: str = NODE) -> list[dict[str, Any]]:
    out = []
    for i, uid in enumerate(UIDS):
        p = pod_object(uid, f"web-{i}", node=node, qos_class=["Guaranteed", "Burstable", "BestEffort"][i])
        out.append(p)
    return out


@dataclass
class Cluster:
    server: APIServer
    kubelet: FakeKubelet
    informer: StatesInformer
    cache: MetricCache
    registry: CollectorRegistry
    events: dict[str, int]
    samples: list[int]

    def nodemetric(self) -> dict[str, Any]:
        return self.server.store.get("nodemetrics", NODE)

    def status_time(self) -> str:
        return str((self.nodemetric().get("status") or {}).get("updateTime", ""))


def _sampler(cache: MetricCache, stop: threading.Event, count: list[int]) -> None:
    """A stand-in for the metrics advisor: node and pod usage every 100 ms."""
    while not stop.wait(0.1):
        cache.append(api.NODE_CPU_USAGE, None, 1.5)
        cache.append(api.NODE_MEMORY_USAGE, None, 2 * 2**30)
        cache.append(api.SYS_CPU_USAGE, None, 0.25)
        cache.append(api.SYS_MEMORY_USAGE, None, 2**29)
        for uid in UIDS:
            cache.append(api.POD_CPU_USAGE, {"pod_uid": uid}, 0.5)
            cache.append(api.POD_MEMORY_USAGE, {"pod_uid": uid}, 2**28)
        count[0] += 1


@pytest.fixture
def cluster_factory(api_server: APIServer, fake_host: Any) -> Iterator[Callable[..., Cluster]]:
    stops: list[tuple[threading.Event, Supervisor, StatesInformer, threading.Thread]] = []
    kubelets: list[FakeKubelet] = []

    def make(
        *,
        with_nodemetric: bool = True,
        with_node: bool = True,
        kubelet: FakeKubelet | None = None,
        **overrides: Any,
    ) -> Cluster:
        """``with_node=False``: the test creates the Node (``node_obj(c.kubelet.port)``) when it wants."""
        store = api_server.store
        if kubelet is None:
            kubelet = FakeKubelet().start()
        kubelets.append(kubelet)
        if with_node:
            store.create("nodes", node_obj(kubelet.port))
        if with_nodemetric:
            store.create(
                "nodemetrics",
                {
                    "apiVersion": "slo.koordinator.sh/v1alpha1",
                    "kind": "NodeMetric",
                    "metadata": {"name": NODE},
                    "spec": {
                        "metricCollectPolicy": {"reportIntervalSeconds": 1, "aggregateDurationSeconds": 60}
                    },
                },
            )
        store.create(
            "nodeslos",
            {
                "apiVersion": "slo.koordinator.sh/v1alpha1",
                "kind": "NodeSLO",
                "metadata": {"name": NODE},
                "spec": {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 60}},
            },
        )
        for p in pods_on():
            store.create("pods", p, "default")
        store.create(
            "pods", pod_object("00000000-0000-4000-8000-0000000000ff", "other", node="node-2"), "default"
        )
        kubelet.set_pods(pods_on())
        cfg = InformerConfig(
            node_name=NODE,
            standalone=False,
            client_configuration=api_server.client_config(),
            kubelet_insecure_tls=True,
            kubelet_read_only_port=kubelet.port,
            kubelet_sync_interval=0.5,
            report_interval_min_seconds=1.0,
            status_qps=5.0,
            status_burst=2,
            max_backoff_seconds=2.0,
            watch_timeout_seconds=5,
            request_timeout_seconds=2.0,
            pleg=False,
        )
        cfg = replace(cfg, **overrides)
        cache = MetricCache()
        registry = CollectorRegistry()
        bus = EventBus()
        events = {api.EVENT_PODS_CHANGED: 0, api.EVENT_NODE_SLO_CHANGED: 0}

        def counter(name: str) -> Callable[[], None]:
            return lambda: events.__setitem__(name, events[name] + 1)

        for name in list(events):
            bus.subscribe(name, counter(name))
        informer = StatesInformer(cfg, Host(fake_host.paths), cache, bus, registry)
        stop = threading.Event()
        sup = Supervisor(stop)
        samples = [0]
        sampler = threading.Thread(target=_sampler, args=(cache, stop, samples), name="test-sampler")
        sampler.start()
        informer.start(stop, sup)
        stops.append((stop, sup, informer, sampler))
        return Cluster(api_server, kubelet, informer, cache, registry, events, samples)

    yield make
    for stop, sup, informer, sampler in stops:
        stop.set()
        informer.shutdown()
        sampler.join(5)
        assert sup.join(time.monotonic() + 10) == [], "informer threads did not end"
        assert not sup.failed, sup.failures
    for k in kubelets:
        k.stop()
