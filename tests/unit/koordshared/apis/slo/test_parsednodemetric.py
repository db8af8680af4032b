"""A NodeMetric kept parsed (the scheduler's caches): it reads as the object it came from, says whether
``status.nodeMetric`` was there, is parsed once, and LoadAware's sums are the same from it as from the
decoded object."""

from __future__ import annotations

import json
from typing import Any

from koord.scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs
from koord.scheduler.plugins.loadaware.assigncache import PodAssignCache
from koordshared.apis.slo.nodemetric import ParsedNodeMetric, parse_node_metric, parse_status
from koordshared.kube.informers import cluster_watches
from koordshared.kube.memstore import MemoryStore
from koordshared.testing.objects import node_metric, pod

NOW = 1_800_000_000.0
GiB = 2**30


def reported(*, with_node_metric: bool = True) -> dict[str, Any]:
    return node_metric(
        "n",
        update_time=NOW - 10,
        cpu_milli=7350,
        memory_bytes=20 * GiB,
        pods=[("default", "web", 400, GiB, "koord-prod"), ("batch", "web", 900, 2 * GiB, "koord-batch")],
        aggregated={("p95", "5m0s"): (8000, 21 * GiB), ("avg", "30m0s"): (6000, 19 * GiB)},
        system=(1000, 2 * GiB),
        report_interval=30,
        with_node_metric=with_node_metric,
    )


def test_reads_as_the_object_it_came_from() -> None:
    raw = reported()
    parsed = parse_node_metric(json.loads(json.dumps(raw)))
    assert isinstance(parsed, ParsedNodeMetric) and parsed.has_node_metric
    assert parsed["metadata"] == raw["metadata"] and parsed["spec"] == raw["spec"]
    assert set(parsed) == set(raw) and len(parsed) == len(raw)
    # The status reads back in Koordinator's shape, with the same meaning as the one reported.
    assert parse_status(parsed["status"]) == parse_status(raw["status"])
    assert parsed.get("status", {})["podsMetric"][1]["namespace"] == "batch"
    assert parse_node_metric(parsed) is parsed
    assert dict(parsed) == {**raw, "status": parsed["status"]}


def test_a_report_without_node_metric_stays_one() -> None:
    parsed = parse_node_metric(reported(with_node_metric=False))
    assert not parsed.has_node_metric and "nodeMetric" not in parsed["status"]
    assert parsed.status is not None and [p.name for p in parsed.status.pods_metric] == ["web", "web"]
    bare = parse_node_metric({"metadata": {"name": "n"}})
    assert bare.status is None and "status" not in bare and bare.get("status") is None


def test_the_scheduler_cache_keeps_it_parsed_and_the_descheduler_raw() -> None:
    sched = cluster_watches(parse_node_metrics=True)[2]
    desched = cluster_watches()[2]
    assert isinstance(MemoryStore([reported()], transform=sched.transform).get("n"), ParsedNodeMetric)
    assert isinstance(MemoryStore([reported()], transform=desched.transform).get("n"), dict)


def test_loadaware_sums_are_the_same_from_either_form() -> None:
    args = LoadAwareSchedulingArgs()
    sums = []
    for obj in (reported(), parse_node_metric(reported())):
        cache = PodAssignCache(args, clock=lambda: NOW)
        for ns, prio in (("default", 9500), ("batch", 5500), ("other", None)):
            cache.assign(
                "n",
                pod(
                    "web",
                    namespace=ns,
                    node_name="n",
                    requests={"cpu": "2", "memory": "4Gi"},
                    scheduled_at=NOW - 30,
                    priority=prio,
                ),
            )
        cache.set_node_metric(obj)
        sums.append(
            [cache.existing("n", prod) for prod in (False, True)]
            + [cache.existing("n", False, "p95", 300.0), cache.existing("n", False, "avg", 0.0)]
        )
    assert sums[0] == sums[1]
    assert sums[0][2] is not None and sums[0][2].usage[0] > 8000  # the p95 window plus the deltas
