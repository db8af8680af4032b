"""The NodeMetric status in Koordinator's shape: one typed schema for agent and cluster
side (a round trip), Go's omitempty rules, and prodReclaimableMetric/prodPeakMetric from the prediction."""

from __future__ import annotations

import dataclasses

from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.prediction.server import PeakPredictServer, PredictionConfig, node_item_uid
from koordlet.statesinformer.metrics import NodeMetricGauges
from koordlet.statesinformer.nodemetric import StatusBuilder
from koordlet.testing import FakeClock, FakeStates, make_node, make_pod
from koordshared.apis.slo.nodemetric import (
    AggregatedUsage,
    CollectPolicy,
    HostAppMetric,
    NodeMetricStatus,
    NUMAUsage,
    PodMetric,
    Usage,
    parse_status,
    to_status,
)
from tests import crdschema
from tests.apiserver.fixtures import NODEMETRIC_CRD

GI = 1 << 30
WALL = 1_767_225_600.0


def full_status() -> NodeMetricStatus:
    u = Usage(1500, 2 * GI)
    return NodeMetricStatus(
        update_time=WALL,
        node_usage=u,
        aggregated_node_usages=(
            AggregatedUsage(300.0, {n: u for n in ("avg", "p50", "p90", "p95", "p99")}),
            AggregatedUsage(1800.0, {}),  # cold start
        ),
        system_usage=Usage(250, GI),
        aggregated_system_usages=(AggregatedUsage(300.0, {"avg": Usage(1, 1), "p99": Usage(2, 3)}),),
        numa_usages=(NUMAUsage(0, u, Usage(100, GI)), NUMAUsage(1, u)),
        pods_metric=(PodMetric("ns", "a", "koord-prod", "LS", u), PodMetric("ns", "b", "", "", Usage())),
        host_application_metric=(HostAppMetric("nginx", "koord-prod", "LS", Usage(100, 200 << 20)),),
        prod_reclaimable=Usage(3000, 8 * GI),
        prod_peak=Usage(9000, 30 * GI),
    )


def test_round_trip_through_the_shared_schema() -> None:
    status = full_status()
    doc = to_status(status)
    back = parse_status(doc)
    # "p50".."p95" of the system aggregate were empty ({}): the parsed view keeps the non-empty ones
    assert back == status
    crdschema.validate(doc, NODEMETRIC_CRD, "status")


def test_koordinators_omitempty_shape() -> None:
    doc = to_status(full_status())
    cold = doc["nodeMetric"]["aggregatedNodeUsages"][1]
    assert cold == {"duration": "30m0s", "usage": {"avg": {}, "p50": {}, "p90": {}, "p95": {}, "p99": {}}}
    assert doc["nodeMetric"]["aggregatedSystemUsages"][0]["usage"]["p50"] == {}
    b = doc["podsMetric"][1]
    assert b == {"name": "b", "namespace": "ns", "podUsage": {"resources": {"cpu": "0", "memory": "0"}}}
    assert "systemUsage" not in doc["nodeMetric"]["numaUsages"][1]
    empty = to_status(NodeMetricStatus(update_time=WALL))
    # nodeMetric and its struct fields always; lists only when non-empty; prodReclaimableMetric always
    assert empty == {
        "updateTime": "2026-01-01T00:00:00Z",
        "nodeMetric": {"nodeUsage": {}, "systemUsage": {}},
        "prodReclaimableMetric": {"resource": {}},
    }


def test_status_reports_the_prod_prediction_and_its_gauges() -> None:
    clock = FakeClock(start=100.0, wall_start=WALL)
    cache = MetricCache(clock=clock, wall_clock=clock.wall)
    pod = dataclasses.replace(
        make_pod("web", api.QOSClass.LS, cpu_request_milli=4000, memory_request_bytes=8 * GI),
        priority_class=api.PriorityClass.PROD,
        created_at=WALL - 3600,  # cold start: its request is its peak, nothing reclaimable from it
    )
    node = make_node(8000, 16 * GI, cpu_allocatable_milli=8000, memory_allocatable_bytes=16 * GI)
    states = FakeStates(node, (pod,), None)
    server = PeakPredictServer(PredictionConfig(safety_margin_percent=0), cache, states, clock.wall)
    for item in ("sys", "koord-prod", ""):
        server.update(node_item_uid(item), 0.0, 0.0)  # idle node: p95 of 0 is bucket 0's end
    registry = CollectorRegistry()
    builder = StatusBuilder(cache, clock.wall, NodeMetricGauges(registry, "n1", usages=True))
    builder.use_prediction(server, states.node)
    for _ in range(120):
        cache.append(api.POD_CPU_USAGE, {"pod_uid": pod.uid}, 1.0)
        cache.append(api.POD_MEMORY_USAGE, {"pod_uid": pod.uid}, GI)
        cache.append(api.NODE_CPU_USAGE, None, 2.0)
        cache.append(api.NODE_MEMORY_USAGE, None, 4 * GI)
        clock.advance(1)
    doc = builder.build(CollectPolicy(), [pod])
    # by pod: nothing predicted -> reclaimable 0; by priority: p95 of 0 cores = end of bucket 0 = 25m,
    # p98 of 0 bytes = 5 MiB for each of the three items: unreclaimable 75m / 15 MiB, requests 4000m/8Gi
    # -> min(8000 - 75, 4000 - 75) = 3925m. The prod result is the smaller: 0.
    assert doc["prodReclaimableMetric"] == {"resource": {"resources": {"cpu": "0", "memory": "0"}}}
    # peak: max(by pod: the cold pod's request 4000m/8Gi, by priority 75m/15Mi)
    assert doc["prodPeakMetric"] == {"resource": {"resources": {"cpu": "4", "memory": "8Gi"}}}
    get = registry.get_sample_value
    peak = {"node": "n1", "predictor": "priorityReclaimablePredictor", "resource": "cpu", "unit": "core"}
    assert get("koordlet_node_predicted_resource_peak", peak) == 0.075
    assert (
        get("koordlet_node_resource_priority_reclaimable_status", {"node": "n1", "priority": "koord-prod"})
        == 0
    )
    usage = {"node": "n1", "resource": "memory", "unit": "byte"}
    assert get("koordlet_node_metric_node_usage", usage) == 4 * GI
    crdschema.validate(doc, NODEMETRIC_CRD, "status")
