"""The states informer against the in-repo test API server (official client) and a fake kubelet.

Covers: NodeMetric status reported every interval and valid against the CRD; NodeSLO changes applied
within an interval and a malformed one refused (last good kept, Warning Event, counter); pods from the
API server by field selector; evictions (evicted/blocked/gone/conflict); and a 60 s API server outage
during which the agent keeps sampling and stays bounded, then resumes reporting and watching by itself
(resuming each watch from its resourceVersion, without a re-list).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from koordlet import api
from koordlet.statesinformer.eviction import EvictResult
from koordlet.testing.kubelet import pod_object
from koordshared import __version__
from koordshared.runtime.lifecycle import wait_for
from tests import crdschema
from tests.apiserver import APIServer
from tests.apiserver.fixtures import NODEMETRIC_CRD
from tests.integration.cluster import NEVER, NODE, OUTAGE_SECONDS, Cluster, pods_on


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
    writes = [r for r in c.server.requests if r.path.endswith(f"nodemetrics/{NODE}/status")]
    assert writes and all(r.method == "PUT" for r in writes), "the status is replaced whole, never patched"

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


def test_status_replaced_whole_so_nothing_stale_stays(
    api_server: APIServer, cluster_factory: Callable[..., Cluster]
) -> None:
    # What a previous agent process reported: a pod since gone, a host application since dropped from
    # the NodeSLO, and a peak prediction this process (no prediction wired here) does not report.
    def entry(name: str) -> dict[str, Any]:
        return {"name": name, "usage": {"resources": {"cpu": "1", "memory": "1Gi"}}}

    api_server.store.create(
        "nodemetrics",
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": NODE},
            "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 1, "aggregateDurationSeconds": 60}},
            "status": {
                "updateTime": "2020-01-01T00:00:00Z",
                "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1", "memory": "1Gi"}}},
                "podsMetric": [
                    {"namespace": "default", "name": "gone", "podUsage": {"resources": {"cpu": "1"}}}
                ],
                "hostApplicationMetric": [entry("old-app")],
                "prodPeakMetric": {"resource": {"resources": {"cpu": "3", "memory": "3Gi"}}},
            },
        },
    )
    c = cluster_factory(with_nodemetric=False)
    assert wait_for(c.informer.has_synced, NEVER, timeout=10)

    def reported(check: Callable[[dict[str, Any]], bool]) -> bool:
        status = c.nodemetric().get("status") or {}
        return status.get("updateTime", "2020") > "2020-01-01T00:00:00Z" and check(status)

    def pods(status: dict[str, Any]) -> list[str]:
        return sorted(p["name"] for p in status.get("podsMetric", []))

    assert wait_for(lambda: reported(lambda s: pods(s) == ["web-0", "web-1", "web-2"]), NEVER, timeout=10)
    status = c.nodemetric()["status"]
    assert "prodPeakMetric" not in status and "hostApplicationMetric" not in status, status

    # A host application: reported while the NodeSLO names it and it has samples, gone once dropped.
    c.server.store.patch("nodeslos", NODE, {"spec": {"hostApplications": [{"name": "app", "qos": "LS"}]}})
    for _ in range(3):
        c.cache.append(api.HOST_APP_CPU_USAGE, {"host_app_name": "app"}, 0.2)
        c.cache.append(api.HOST_APP_MEMORY_USAGE, {"host_app_name": "app"}, 2**20)
    assert wait_for(lambda: reported(lambda s: "hostApplicationMetric" in s), NEVER, timeout=10)
    c.server.store.patch("nodeslos", NODE, {"spec": {"hostApplications": None}})
    assert wait_for(lambda: reported(lambda s: "hostApplicationMetric" not in s), NEVER, timeout=10)

    # Pods leave the node: their entries leave the NodeMetric with the next report, also when no pod
    # is left to measure (the one that came has no samples yet, and an empty podsMetric is omitted).
    c.kubelet.set_pods(pods_on()[:2])
    assert wait_for(lambda: reported(lambda s: pods(s) == ["web-0", "web-1"]), NEVER, timeout=10)
    c.kubelet.set_pods([pod_object("00000000-0000-4000-8000-0000000000ee", "fresh", node=NODE)])
    assert wait_for(lambda: [p.name for p in c.informer.pods()] == ["fresh"], NEVER, timeout=10)
    assert wait_for(lambda: reported(lambda s: "podsMetric" not in s), NEVER, timeout=10)
    assert c.nodemetric()["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 1  # spec untouched


def test_the_agent_names_itself_to_the_api_server_and_the_kubelet(
    cluster_factory: Callable[..., Cluster],
) -> None:
    c = cluster_factory()
    assert wait_for(c.informer.has_synced, NEVER, timeout=10)
    assert wait_for(lambda: c.status_time() != "", NEVER, timeout=10)
    assert c.informer.record_event("Node", "", NODE, "", "Normal", "Test", "hello")
    want = f"koordlet/{__version__} ({NODE})"
    requests = c.server.requests
    assert {r.method for r in requests} >= {"GET", "PUT", "POST"}, "lists and watches, the status, the Event"
    assert {{k.lower(): v for k, v in r.headers.items()}.get("user-agent") for r in requests} == {want}
    assert c.kubelet.user_agents and set(c.kubelet.user_agents) == {want}


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
    # evicted, the pod terminates on its node until the kubelet confirms it stopped
    assert c.server.store.get("pods", "web-9", "default")["metadata"].get("deletionTimestamp")
    assert c.server.kubelet.confirm("default", "web-9")
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
        answered_before_up = len(c.server.requests)
        c.server.up()
    # sampling went on (a sample per 100 ms, allow for a slow CI machine)
    assert c.samples[0] - samples_at_down >= OUTAGE_SECONDS * 5
    assert mid is not None
    assert end_mem - mid < 512 * 1024, f"memory grew {end_mem - mid} bytes in the second half"
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
    # ...from the resourceVersion each had: the outage cost no list. (The agent's own loops re-listed
    # all four objects after every error; the shared informer re-lists only on 410 Gone.)
    after = c.server.requests[answered_before_up:]
    assert [r.path for r in after if r.method == "GET" and r.query.get("watch") != "true"] == []
