"""The ``/status`` document (koordlet/v1 AgentStatus) built from the kit's fakes, the plugin report of the
QoS manager, and BECPUSuppress's own status: the numbers its budget was computed from."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.agentstatus import API_VERSION, StatusSources, build_status, status_route
from koordlet.featuregates import FeatureGate
from koordlet.metrics import PluginMetrics
from koordlet.qosmanager.loader import PluginEntry
from koordlet.qosmanager.manager import QOSManager, Services
from koordlet.testing import (
    FakeClock,
    FakeEvictor,
    FakeExecutor,
    FakeHostReader,
    FakeMetrics,
    FakeStates,
    be_slo,
    make_harness,
    make_node,
    make_pod,
    topology,
)
from koordshared.runtime.eventbus import EventBus
from koordshared.runtime.httpserver import Rendered, Response
from koordshared.runtime.lifecycle import Supervisor
from qosplugins.cpusuppress import BECPUSuppress
from tests.unit.qosplugins.cpusuppress.test_fastpath import fast_sample, quiet_samples

BE = "kubepods/besteffort"


def sources(
    states: FakeStates,
    metrics: FakeMetrics,
    host: FakeHostReader,
    audit: list[dict[str, Any]] | None = None,
    plugins: list[dict[str, api.JSONValue]] | None = None,
) -> StatusSources:
    return StatusSources(
        "node-1", states, metrics, host, lambda: audit or [], lambda: plugins or [], lambda: 1000.0, 900.0
    )


def world() -> tuple[FakeClock, FakeStates, FakeMetrics, FakeHostReader, api.PodInfo, api.PodInfo]:
    clock = FakeClock()
    ls = make_pod("web", api.QOSClass.LS, priority=9000, cpu_request_milli=500)
    be = make_pod("batch", api.QOSClass.BE)
    states = FakeStates(make_node(4000, 8 * 2**30), [be, ls])
    metrics = FakeMetrics(clock)
    host = FakeHostReader(1, topology(sockets=1, cores=4, threads=1))
    host.add_cgroup(BE, cpuset_cpus="0-1", cpu_cfs_quota_us="150000", cpu_cfs_period_us="100000")
    for t, (ls_c, be_c) in enumerate([(1.0, 0.2), (2.0, 0.4)]):
        at = clock() - 1 + t
        metrics.set(api.POD_CPU_USAGE, ls_c, {"pod_uid": ls.uid}, at=at)
        metrics.set(api.POD_CPU_USAGE, be_c, {"pod_uid": be.uid}, at=at)
        metrics.set(api.NODE_CPU_USAGE, ls_c + be_c + 0.5, at=at)
    metrics.set(api.POD_MEMORY_USAGE, 2**20, {"pod_uid": ls.uid})
    metrics.set(api.NODE_BE, 300.0, {"be_resource": "cpu", "be_allocation": "usage"})
    return clock, states, metrics, host, ls, be


def test_document_has_pods_by_usage_with_qos_and_the_be_tier_as_the_kernel_holds_it() -> None:
    _clock, states, metrics, host, *_ = world()
    doc = build_status(sources(states, metrics, host), window=5)
    assert doc["apiVersion"] == API_VERSION and doc["kind"] == "AgentStatus"
    assert [p["name"] for p in doc["pods"]] == ["web", "batch"]  # sorted by CPU, not listing order
    web = doc["pods"][0]
    assert web["qos"] == "LS" and web["kubeQOS"] == "Burstable" and web["priority"] == 9000
    assert web["cpuCores"] == pytest.approx(1.5)  # average of the window's samples
    assert web["memoryBytes"] == 2**20 and web["cpuRequestMilli"] == 500
    assert doc["pods"][1]["memoryBytes"] is None  # no sample: null, not 0
    assert doc["node"]["cpu"] == {"capacityCores": 4.0, "usedCores": pytest.approx(2.3)}  # (1.7 + 2.9) / 2
    tier = doc["beCPU"]
    assert tier["cpuset"] == "0-1" and tier["cpusetCPUs"] == 2 and tier["cfsQuotaUs"] == 150000
    assert tier["allowedCores"] == 1.5  # the tighter of 2 CPUs and 1.5 cores of quota
    assert tier["usedCores"] == pytest.approx(0.3)
    # a window that excludes the first sample averages only the second
    narrow = build_status(sources(states, metrics, host), window=0.5)
    assert narrow["pods"][0]["cpuCores"] == pytest.approx(2.0)


def test_unlimited_quota_and_unreadable_values_do_not_break_the_document() -> None:
    _clock, states, metrics, host, *_ = world()
    host.values[("cpu.cfs_quota_us", BE)] = "-1"
    host.broken.add(("cpuset.cpus", BE))
    tier = build_status(sources(states, metrics, host))["beCPU"]
    assert tier["cpuset"] is None and tier["cfsQuotaUs"] == -1 and tier["allowedCores"] is None


def test_evictions_come_from_the_audit_log_newest_first() -> None:
    _clock, states, metrics, host, *_ = world()
    audit = [
        {"seq": 1, "time": 10.0, "resource": "cpuset.cpus", "owner": "BECPUSuppress", "path": BE},
        {
            "seq": 2,
            "time": 11.0,
            "resource": "pod/eviction",
            "owner": "BEMemoryEvict",
            "path": "ns/a",
            "before": "uid-a",
            "after": "killed 1 process(es)",
            "reason": "memory 80% > 70%",
        },
        {
            "seq": 3,
            "time": 12.0,
            "resource": "pod/eviction",
            "owner": "BECPUEvict",
            "path": "ns/b",
            "before": "uid-b",
            "after": "dry-run",
            "reason": "cpu satisfaction low",
        },
    ]
    doc = build_status(sources(states, metrics, host, audit))
    assert [e["pod"] for e in doc["evictions"]] == ["ns/b", "ns/a"]
    assert doc["evictions"][1] == {
        "time": 11.0,
        "pod": "ns/a",
        "uid": "uid-a",
        "by": "BEMemoryEvict",
        "message": "memory 80% > 70%",
        "outcome": "killed 1 process(es)",
    }


def test_route_checks_the_window_and_serves_json() -> None:
    _clock, states, metrics, host, *_ = world()
    route = status_route(sources(states, metrics, host))

    def get(query: dict[str, list[str]]) -> Response:
        out = route(query)
        assert not isinstance(out, Rendered)
        return out

    status, ctype, body = get({"window": ["2.5"]})
    assert status == 200 and ctype == "application/json"
    assert json.loads(body)["windowSeconds"] == 2.5
    for bad in ("0", "601", "x", "nan"):
        status, _, body = get({"window": [bad]})
        assert status == 400 and b"window" in body, bad


class Reporting(api.QOSPluginBase):
    name = "Reporting"

    def status(self) -> api.JSONObject:
        return {"decided": 3}


class Raising(api.QOSPluginBase):
    name = "Raising"

    def status(self) -> api.JSONObject:
        raise RuntimeError("half-built")


class Quiet(api.QOSPluginBase):
    name = "Quiet"


def test_manager_report_has_every_plugin_and_survives_a_raising_status() -> None:
    clock = FakeClock()
    entries = [
        PluginEntry(cls.name, cls(), api.FeatureSpec(default=on), "builtin", True)
        for cls, on in ((Reporting, True), (Raising, True), (Quiet, True), (BECPUSuppress, False))
    ]
    gates = FeatureGate({e.name: e.spec for e in entries}, flag="--feature-gates")
    services = Services(
        node_name="node-1",
        states=FakeStates(),
        metrics=FakeMetrics(clock),
        host=FakeHostReader(),
        executor=FakeExecutor(FakeHostReader()),
        evictor=FakeEvictor(),
        clock=clock,
        wall_clock=clock,
        bus=EventBus(),
        registry=PluginMetrics(CollectorRegistry()),
    )
    qos = QOSManager(
        entries,
        gates,
        FeatureGate({}, flag="--qos-extension-plugins"),
        {},
        services,
        Supervisor(threading.Event()),
    )
    assert [r["state"] for r in qos.report()] == ["pending"] * 4
    qos.run(threading.Event())
    rows = {r["name"]: r for r in qos.report()}
    assert rows["Reporting"] == {
        "name": "Reporting",
        "source": "builtin",
        "state": "running",
        "status": {"decided": 3},
    }
    assert rows["Raising"]["status"] == {"error": "RuntimeError('half-built')"}
    assert "status" not in rows["Quiet"]  # not a StatusReporter
    assert rows["BECPUSuppress"] == {"name": "BECPUSuppress", "source": "builtin", "state": "disabled"}


def test_cpusuppress_status_explains_its_budget_on_both_paths() -> None:
    h = make_harness(1, topology(sockets=1, cores=4, threads=2), slo=be_slo(cpu_suppress_policy="cfsQuota"))
    ls = h.add_pod(make_pod("ls", api.QOSClass.LS))
    be = h.add_pod(make_pod("be", api.QOSClass.BE))
    h.metrics.set(api.POD_CPU_USAGE, 2.0, {"pod_uid": ls.uid})
    h.metrics.set(api.POD_CPU_USAGE, 3.0, {"pod_uid": be.uid})
    h.metrics.set(api.NODE_CPU_USAGE, 5.5)
    plugin = BECPUSuppress()
    h.start(plugin)
    assert plugin.status() == {}  # nothing decided yet
    plugin.reconcile()
    st = dict(plugin.status())
    assert st.pop("decidedAt") is not None
    # budget = 8000 * 65% - (2000 LS + 500 system) = 2700m
    assert st == {
        "active": True,
        "policy": "cfsQuota",
        "path": "periodic",
        "capacityMilli": 8000,
        "thresholdPercent": 65,
        "minPercent": None,
        "nodeUsedMilli": 5500,
        "lsPodsMilli": 2000,
        "lsHostAppsMilli": 0,
        "systemMilli": 500,
        "reservedMilli": 0,
        "bePodsMilli": 3000,
        "nonBEMilli": 2500,
        "budgetMilli": 2700,
        "noiseBandMilli": None,  # no fast samples yet
        "fastSamplesWanted": True,  # BE uses CPU and a rise of LS would cross the threshold
    }
    assert h.host.read("cpu.cfs_quota_us", BE) == "270000"  # what it explains is what it wrote
    quiet_samples(h, 5.5, 3.0)  # the noise the fast path learns before it acts
    fast_sample(h, 7.5, 2.5)
    fast = plugin.status()
    # the fast path: non-BE (7.5 - 2.5) = 5000m, budget 200m; the per-pod split is the last periodic one
    assert (fast["path"], fast["nonBEMilli"], fast["budgetMilli"]) == ("fast", 5000, 200)
    assert fast["noiseBandMilli"] == 0  # the quiet samples had no spread
    assert fast["lsPodsMilli"] == 2000 and fast["systemMilli"] == 500
    # the write's audit reason names the same figures (it named the stale periodic non-BE before)
    # and say which path wrote it
    assert h.executor.updates[-1].reason == "BE budget 200m, non-BE 5000m; fast sample"
    assert h.executor.updates[0].reason == "BE budget 2700m, non-BE 2500m"
    h.states.slo = api.NodeSLO()
    plugin.reconcile()
    assert plugin.status() == {"active": False, "why": "resourceUsedThresholdWithBE disabled in the NodeSLO"}
