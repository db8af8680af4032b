"""The states informer against the in-repo test API server (official client) and a fake kubelet.

Covers: NodeMetric status reported every interval and valid against the CRD; NodeSLO changes applied
within an interval and a malformed one refused (last good kept, Warning Event, counter); pods from the
API server by field selector; evictions (evicted/blocked/gone/conflict); and a 60 s API server outage
during which the agent keeps sampling and stays bounded, then resumes reporting by itself.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.eventbus import EventBus
from koordlet.lifecycle import Supervisor, wait_for
from koordlet.metriccache import MetricCache
from koordlet.statesinformer.config import InformerConfig
from koordlet.statesinformer.eviction import EvictResult
from koordlet.statesinformer.informer import StatesInformer
from koordlet.system.host import Host
from koordlet.testing.kubelet import FakeKubelet, pod_object
from tests import crdschema
from tests.apiserver import APIServer
from tests.apiserver.fixtures import NODEMETRIC_CRD, api_server, api_server_factory  # noqa: F401

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
def cluster_factory(api_server: APIServer, fake_host: Any) -> Iterator[Callable[..., Cluster]]:  # noqa: F811
    stops: list[tuple[threading.Event, Supervisor, StatesInformer, threading.Thread]] = []
    kubelets: list[FakeKubelet] = []

    def make(
        *, with_nodemetric: bool = True, kubelet: FakeKubelet | None = None, **overrides: Any
    ) -> Cluster:
        store = api_server.store
        if kubelet is None:
            kubelet = FakeKubelet().start()
        kubelets.append(kubelet)
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


def test_cluster_report_node_pods_and_schema(cluster_factory: Callable[..., Cluster]) -> None:
    c = cluster_factory()
    assert wait_for(c.informer.has_synced, NEVER, timeout=10)
    node = c.informer.node()
    assert node is not None
    assert (node.cpu_capacity_milli, node.cpu_allocatable_milli, node.memory_allocatable_bytes) == (
        4000,
        3800,
        7 * 2**30,
    )
    assert (node.batch_cpu_allocatable_milli, node.batch_memory_allocatable_bytes) == (2000, 2 * 2**30)
    assert sorted(p.name for p in c.informer.pods()) == ["web-0", "web-1", "web-2"]
    assert [p.qos for p in sorted(c.informer.pods(), key=lambda p: p.name)] == [
        api.QOSClass.LSR,
        api.QOSClass.LS,
        api.QOSClass.BE,
    ]
    assert wait_for(lambda: c.status_time() != "", NEVER, timeout=10)
    assert wait_for(lambda: len((c.nodemetric()["status"]).get("podsMetric", [])) == 3, NEVER, timeout=10)
    status = c.nodemetric()["status"]
    crdschema.validate(status, NODEMETRIC_CRD, "status")
    assert status["nodeMetric"]["nodeUsage"]["resources"] == {"cpu": "1500m", "memory": "2Gi"}
    assert status["nodeMetric"]["systemUsage"]["resources"] == {"cpu": "250m", "memory": "512Mi"}
    assert {p["name"]: p["qos"] for p in status["podsMetric"]} == {
        "web-0": "LSR",
        "web-1": "LS",
        "web-2": "BE",
    }
    assert c.nodemetric()["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 1  # spec untouched
    # reported every interval (1 s): updateTime (second resolution) moves on
    first = c.status_time()
    assert wait_for(lambda: c.status_time() > first, NEVER, timeout=5)
    patches = [r for r in c.server.requests if r.method == "PATCH" and r.path.endswith("/status")]
    assert all(r.headers.get("Content-Type", "").startswith("application/merge-patch+json") for r in patches)

    # kubelet answering garbage or empty lists: the pods stay
    c.kubelet.mode = "garbage"
    assert wait_for(
        lambda: (c.registry.get_sample_value("koordlet_pods_refresh_total", {"result": "kept"}) or 0) >= 2,
        NEVER,
        timeout=5,
    )
    assert len(c.informer.pods()) == 3
    c.kubelet.mode = "ok"
    c.kubelet.set_pods(pods_on()[:2])
    assert wait_for(lambda: len(c.informer.pods()) == 2, NEVER, timeout=5)


def test_nodeslo_change_and_malformed(cluster_factory: Callable[..., Cluster]) -> None:
    c = cluster_factory()
    assert wait_for(c.informer.has_synced, NEVER, timeout=10)
    slo = c.informer.node_slo()
    assert slo.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 60
    gen = slo.generation
    store = c.server.store
    store.patch(
        "nodeslos", NODE, {"spec": {"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 45}}}
    )
    t0 = time.monotonic()
    assert wait_for(lambda: c.informer.node_slo().generation == gen + 1, NEVER, timeout=5)
    assert time.monotonic() - t0 < 1.0 + 0.5  # within one report interval
    good = c.informer.node_slo()
    assert good.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 45
    assert c.events[api.EVENT_NODE_SLO_CHANGED] >= 1
    # schema-valid but contradictory: the release point above the eviction threshold
    store.patch(
        "nodeslos",
        NODE,
        {
            "spec": {
                "resourceUsedThresholdWithBE": {
                    "memoryEvictThresholdPercent": 60,
                    "memoryEvictLowerPercent": 80,
                }
            }
        },
    )
    assert wait_for(
        lambda: c.registry.get_sample_value("koordlet_nodeslo_invalid_total") == 1.0, NEVER, timeout=5
    )
    assert c.informer.node_slo() is good

    def warning_event() -> list[dict[str, Any]]:
        return [
            e
            for e in store.list("events", "default")[0]
            if e.get("reason") == "NodeSLOInvalid" and e["involvedObject"]["name"] == NODE
        ]

    assert wait_for(lambda: bool(warning_event()), NEVER, timeout=5)
    ev = warning_event()[0]
    assert ev["type"] == "Warning" and "memoryEvictLowerPercent" in ev["message"]
    assert ev["involvedObject"]["kind"] == "Node"
    # a NodeSLO deleted -> defaults again (a valid change)
    store.delete("nodeslos", NODE)
    assert wait_for(
        lambda: c.informer.node_slo().resource_used_threshold_with_be.enable is False, NEVER, timeout=5
    )


def test_pods_from_api_server_and_evictions(cluster_factory: Callable[..., Cluster]) -> None:
    c = cluster_factory(pod_source="api", pods_staleness_seconds=2.0)
    assert wait_for(c.informer.has_synced, NEVER, timeout=10)
    assert sorted(p.name for p in c.informer.pods()) == ["web-0", "web-1", "web-2"]  # not node-2's pod

    def lists() -> list[Any]:
        return [r for r in c.server.requests if r.method == "GET" and r.path == "/api/v1/pods"]

    assert wait_for(lambda: bool(lists()), NEVER, timeout=5)  # the server logs a request after answering
    assert all(r.query.get("fieldSelector") == f"spec.nodeName={NODE}" for r in lists())
    # the server assigns UIDs itself, so pods are found by name here
    c.server.store.create("pods", pod_object("00000000-0000-4000-8000-000000000009", "web-9"), "default")
    assert wait_for(lambda: any(p.name == "web-9" for p in c.informer.pods()), NEVER, timeout=5)
    by_name = {p.name: p for p in c.informer.pods()}
    assert c.informer.evict(by_name["web-9"], "BEMemoryEvict", "memory over 70%") is EvictResult.EVICTED
    assert wait_for(lambda: all(p.name != "web-9" for p in c.informer.pods()), NEVER, timeout=5)
    c.server.evictions_answer_429(True)
    assert c.informer.evict(by_name["web-2"], "BECPUEvict", "x") is EvictResult.BLOCKED
    c.server.evictions_answer_429(False)
    assert c.informer.evict(by_name["web-9"], "BECPUEvict", "x") is EvictResult.GONE
    impostor = replace(by_name["web-1"], uid="00000000-0000-4000-8000-0000000000aa")
    # the UID precondition protects web-1
    assert c.informer.evict(impostor, "BECPUEvict", "x") is EvictResult.CONFLICT
    assert c.server.store.get("pods", "web-1", "default")["metadata"]["uid"] == by_name["web-1"].uid
    evicted = [e for e in c.server.store.list("events", "default")[0] if e.get("reason") == "Evicted"]
    assert [e["involvedObject"]["name"] for e in evicted] == ["web-9"]
    assert c.informer.record_event("Pod", "default", "web-0", by_name["web-0"].uid, "Normal", "Test", "hello")

    # the API server goes away: pods are kept, the informer turns degraded, then recovers by itself
    n = len(c.informer.pods())
    c.server.down()
    try:
        assert wait_for(c.informer.degraded, NEVER, timeout=10)
        assert c.informer.has_synced() and len(c.informer.pods()) == n
        assert c.registry.get_sample_value("koordlet_states_informer_degraded") == 1.0
        assert not c.informer.record_event("Pod", "default", "web-0", "", "Normal", "Test", "down")
    finally:
        c.server.up()
    assert wait_for(lambda: not c.informer.degraded(), NEVER, timeout=10)


def test_api_server_outage(cluster_factory: Callable[..., Cluster]) -> None:
    c = cluster_factory()
    assert wait_for(c.informer.has_synced, NEVER, timeout=10)
    assert wait_for(lambda: c.status_time() != "", NEVER, timeout=10)
    gc.collect()
    threads_before = threading.active_count()
    # The metric cache's rings legitimately grow up to their fixed capacity and pytest keeps every log
    # record: leave both out, and look at what the agent itself holds on to during the outage.
    ignore = [
        tracemalloc.Filter(False, f"*{part}*")
        for part in ("metriccache", "logging", "_pytest", "tracemalloc")
    ]

    def traced() -> int:
        gc.collect()
        return sum(s.size for s in tracemalloc.take_snapshot().filter_traces(ignore).statistics("filename"))

    # pytest keeps every log record (urllib3's hold exceptions and their frames): silence warnings for
    # the measurement, that retention is the test harness's, not the agent's.
    logging.disable(logging.WARNING)
    tracemalloc.start()
    try:
        c.server.down()
        t_end = time.monotonic() + OUTAGE_SECONDS
        samples_at_down = c.samples[0]
        mid: int | None = None
        peak_threads = threads_before
        while time.monotonic() < t_end:
            NEVER.wait(min(1.0, max(t_end - time.monotonic(), 0)))
            peak_threads = max(peak_threads, threading.active_count())
            if mid is None and time.monotonic() > t_end - OUTAGE_SECONDS / 2:
                mid = traced()
        end_mem = traced()
    finally:
        tracemalloc.stop()
        logging.disable(logging.NOTSET)
        c.server.up()
    # sampling went on (a sample per 100 ms, allow for a slow CI machine)
    assert c.samples[0] - samples_at_down >= OUTAGE_SECONDS * 5
    assert mid is not None and end_mem - mid < 512 * 1024, (
        f"memory grew {end_mem - mid} bytes in the second half"
    )
    assert peak_threads <= threads_before + 2
    results = {
        r: c.registry.get_sample_value("koordlet_nodemetric_report_total", {"result": r}) or 0
        for r in ("error", "retry", "ok")
    }
    # backoff: far fewer attempts than one per second over the outage
    assert 0 < results["error"] + results["retry"] <= OUTAGE_SECONDS / 2 + 4
    assert c.informer.has_synced() and len(c.informer.pods()) == 3  # kubelet is separate: pods stay fresh
    before = c.status_time()
    t_up = time.monotonic()
    assert wait_for(lambda: c.status_time() > before, NEVER, timeout=15), "reporting did not resume"
    resumed_after = time.monotonic() - t_up
    assert resumed_after < 2.0 + 2.0 + 2.0  # backoff cap + interval + slack
    # watches resumed too: a NodeSLO change still applies
    gen = c.informer.node_slo().generation
    c.server.store.patch("nodeslos", NODE, {"spec": {"cpuBurstStrategy": {"policy": "auto"}}})
    assert wait_for(lambda: c.informer.node_slo().generation == gen + 1, NEVER, timeout=10)


def test_kubeconfig_selects_cluster_mode(
    cluster_factory: Callable[..., Cluster],
    api_server: APIServer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": {"server": api_server.url}}],
                "users": [{"name": "koordlet", "user": {"token": "t"}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "koordlet"}}],
                "current-context": "test",
            }
        )
    )
    c = cluster_factory(client_configuration=None, kubeconfig=str(kubeconfig), standalone=None)
    assert not c.informer.standalone
    assert wait_for(c.informer.has_synced, NEVER, timeout=10)
    node = c.informer.node()
    assert node is not None and node.name == NODE
    auth = [
        {k.lower(): v for k, v in r.headers.items()}.get("authorization")
        for r in c.server.requests
        if r.path.startswith("/api/v1/nodes")
    ]
    assert auth and all(a == "Bearer t" for a in auth)


@pytest.mark.parametrize("create", [False, True])
def test_nodemetric_absent_is_skipped_or_created(
    cluster_factory: Callable[..., Cluster], create: bool
) -> None:
    c = cluster_factory(with_nodemetric=False, create_node_metric=create)
    assert wait_for(c.informer.has_synced, NEVER, timeout=10)

    def status() -> dict[str, Any] | None:
        try:
            return c.nodemetric().get("status")
        except Exception:  # the store raises its 404 APIError while the object does not exist
            return None

    if not create:
        # koordlet never creates it: reports are skipped while slo-controller has not made it
        assert wait_for(
            lambda: (
                (c.registry.get_sample_value("koordlet_nodemetric_report_total", {"result": "skipped"}) or 0)
                >= 2
            ),
            NEVER,
            timeout=8,
        )
        assert status() is None
        assert not any(r.method in ("POST", "PATCH") and "nodemetrics" in r.path for r in c.server.requests)
        return
    assert wait_for(lambda: bool(status()), NEVER, timeout=10)
    crdschema.validate(status(), NODEMETRIC_CRD, "status")
    assert c.nodemetric()["metadata"]["name"] == NODE


@pytest.mark.tool("openssl")
def test_kubelet_over_https_with_token(cluster_factory: Callable[..., Cluster], tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("sa-token\n")
    kubelet = FakeKubelet(tls_dir=tmp_path, token="sa-token").start()
    c = cluster_factory(
        kubelet=kubelet,
        kubelet_insecure_tls=False,
        kubelet_port=0,  # from the Node's daemonEndpoints
        kubelet_token_file=str(token),
        kubelet_ca_file=str(kubelet.cert),
    )
    assert wait_for(c.informer.has_synced, NEVER, timeout=10)
    assert sorted(p.name for p in c.informer.pods()) == ["web-0", "web-1", "web-2"]
    assert set(kubelet.auth_headers) == {"Bearer sa-token"}
