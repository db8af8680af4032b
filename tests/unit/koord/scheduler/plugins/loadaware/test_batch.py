"""LoadAware's vector filter and score over many snapshot rows give, node by node, what Koordinator's
scalar ``Filter``/``Score`` give: the reference below is ``load_aware.go`` written out per node over the
assign cache's ``existing`` load, on a cluster mixing every case (usage, prod and aggregated thresholds
from args and node annotations, expired, stale and empty NodeMetrics, nodes without one, zero capacity,
prod and batch pods, pods placed after the report). Then the arrays follow the cache: a pod bound, a
NodeMetric replaced or deleted, a node's annotation changed."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np

from koord.scheduler.framework import CycleState, NodeInfo, NodeSet
from koord.scheduler.plugins.loadaware.batch import Limits
from koord.scheduler.plugins.loadaware.plugin import (
    AGG_OVER,
    EXPIRED,
    MAX_SCORE,
    OVER,
    LoadAwareScheduling,
)
from koord.scheduler.plugins.loadaware.thresholds import ANNOTATION_USAGE_THRESHOLDS
from koordshared.testing.objects import GiB, pod
from tests.support.scheduler.env import Env

ARGS = {
    "prodUsageThresholds": {"cpu": 55},
    "aggregated": {
        "usageThresholds": {"cpu": 70, "memory": 90},
        "usageAggregationType": "p95",
        "usageAggregatedDuration": "5m",
        "scoreAggregationType": "p90",
        "scoreAggregatedDuration": "10m",
    },
}
INCOMING = {
    "batch": pod("be"),
    "prod": pod("prod", requests={"cpu": "2", "memory": "1Gi"}, limits={"cpu": "2", "memory": "1Gi"}),
    "daemonset": pod("ds", owner_kind="DaemonSet", requests={"cpu": "4"}),
}


def _annotation(rng: random.Random) -> dict[str, str]:
    choice = rng.randrange(5)
    if choice == 0:
        return {}
    if choice == 1:
        usage = {"cpu": rng.choice([0, 40, 80]), "memory": rng.choice([0, 90])}
        doc: dict[str, Any] = {"usageThresholds": usage}
    elif choice == 2:
        doc = {"prodUsageThresholds": {"memory": 60}}
    elif choice == 3:
        doc = {
            "aggregatedUsage": {
                "usageThresholds": {"cpu": rng.choice([50, 60])},
                "usageAggregationType": rng.choice(["p50", "p99", "avg"]),
                "usageAggregatedDuration": rng.choice(["5m", "30m", ""]),
            }
        }
    else:
        doc = {"usageThresholds": {"cpu": 0, "memory": 0}}
    return {ANNOTATION_USAGE_THRESHOLDS: json.dumps(doc)}


def cluster(seed: int, args: dict[str, Any] | None) -> Env:
    rng = random.Random(seed)
    env = Env(args)
    for i in range(120):
        name = f"n{i:03d}"
        cpu = rng.choice(["0", "8", "16", "32"])
        env.add_node(name, cpu=cpu, memory=rng.choice(["32Gi", "64Gi"]), annotations=_annotation(rng))
        for j in range(rng.randrange(4)):
            env.pods.put(
                pod(
                    f"{name}-p{j}",
                    node_name=name,
                    requests={"cpu": rng.choice(["500m", "2"]), "memory": "1Gi"},
                    limits={"cpu": "4", "memory": "2Gi"},
                    labels={"koordinator.sh/priority-class": rng.choice(["koord-prod", "koord-batch"])},
                    scheduled_at=env.now - rng.choice([20, 3600]),
                )
            )
        kind = rng.randrange(6)
        if kind == 0:
            continue  # no NodeMetric
        reported = [
            ("default", f"{name}-p{j}", rng.randrange(3000), rng.randrange(2 * GiB), "koord-prod")
            for j in range(rng.randrange(3))
        ]
        env.report(
            name,
            age=rng.choice([5.0, 60.0, 179.0, 180.0, 500.0]),
            cpu_milli=rng.randrange(30000),
            memory_bytes=rng.randrange(60 * GiB),
            pods=reported,
            aggregated={
                (t, d): (rng.randrange(30000), rng.randrange(60 * GiB))
                for t in ("p50", "p90", "p95", "p99")
                for d in ("5m0s", "10m0s", "30m0s")
                if rng.random() < 0.7
            },
            with_node_metric=kind != 1,
        )
    return env


def reference_filter(la: LoadAwareScheduling, state: CycleState, pod_: Any, ni: NodeInfo) -> Any:
    """Koordinator's Filter on one node, over the assign cache's scalar ``existing``."""
    facts = la.pod_facts(state, pod_)
    if facts.daemonset:
        return None
    existing = la.cache.existing(ni.name, False)
    if existing is None or ni.node is None:
        return None
    nf = la.node_facts(ni)
    agg = None
    limits: Limits | None
    if facts.prod and nf.prod_limits is not None:
        limits = nf.prod_limits
    elif nf.agg_limits is not None:
        limits, agg = nf.agg_limits, nf.profile.aggregated
    else:
        limits = nf.usage_limits
    if limits is None:
        return None
    now, expiration = la.handle.now(), la.args.node_metric_expiration_seconds
    t = existing.update_time
    if la.args.filter_expired_node_metrics and (t is None or now - t >= expiration):
        return None if la.args.enable_schedule_when_node_metrics_expired else EXPIRED
    if not existing.has_node_metric:
        return None
    if agg is not None:
        got = la.cache.existing(ni.name, False, agg.aggregation_type, agg.duration)
    else:
        got = la.cache.existing(ni.name, facts.prod and nf.prod_limits is not None)
    assert got is not None
    used = got.usage
    for r in (0, 1):
        if (used[r] + facts.estimate[r]) / nf.divisor[r] * 100 >= limits[r]:
            return (AGG_OVER if agg is not None else OVER)[r]
    return None


def reference_score(la: LoadAwareScheduling, state: CycleState, pod_: Any, ni: NodeInfo) -> int:
    facts = la.pod_facts(state, pod_)
    prod = la.args.score_according_prod_usage and facts.prod
    agg = la.args.aggregated
    agg_type, agg_duration = (
        (agg.score_aggregation_type, agg.score_aggregated_duration)
        if agg is not None and agg.score_aggregation_type and not prod
        else ("", 0.0)
    )
    existing = la.cache.existing(ni.name, prod, agg_type, agg_duration)
    now, expiration = la.handle.now(), la.args.node_metric_expiration_seconds
    if existing is None or ni.node is None or not existing.has_node_metric:
        return 0
    if existing.update_time is None or now - existing.update_time >= expiration:
        return 0
    cap = la.node_facts(ni).capacity
    weights = (la.args.resource_weights.get("cpu", 0), la.args.resource_weights.get("memory", 0))
    dominant = la.args.dominant_resource_weight
    least = []
    for r in (0, 1):
        used = existing.usage[r] + facts.estimate[r]
        least.append((cap[r] - used) * MAX_SCORE // cap[r] if cap[r] and used <= cap[r] else 0)
    total = least[0] * weights[0] + least[1] * weights[1] + min(least) * dominant
    return total // (weights[0] + weights[1] + dominant)


def check(env: Env) -> int:
    """Every incoming pod's batch answers against the reference on every node; the nodes compared."""
    la = env.plugin
    with env.handle.cycle() as snapshot:
        nodes = NodeSet(snapshot, np.arange(len(snapshot), dtype=np.int64)[::-1].copy())
        for incoming in INCOMING.values():
            state = CycleState()
            la.pre_filter(state, incoming)
            got = la.filter_nodes(state, incoming, nodes)
            want = [reference_filter(la, state, incoming, ni) for ni in nodes]
            assert list(got) == want
            scores = la.score_nodes(state, incoming, nodes).tolist()
            assert scores == [reference_score(la, state, incoming, ni) for ni in nodes]
            # one node at a time (the scalar entry points) agrees as well
            ni = nodes[7]
            assert la.filter(state, incoming, ni) == want[7]
            assert la.score(state, incoming, ni) == scores[7]
        return len(nodes)


def test_batch_matches_the_scalar_formulas_on_a_mixed_cluster() -> None:
    for seed, args in ((1, None), (2, ARGS), (3, {**ARGS, "scoreAccordingProdUsage": True}), (4, ARGS)):
        env = cluster(seed, args)
        assert check(env) == 120
        if args is ARGS:  # the mix covers every outcome
            with env.handle.cycle():
                answers = {
                    env.plugin.filter_nodes(_state(env, incoming), incoming, [ni])[0]
                    for incoming in INCOMING.values()
                    for ni in env.handle.node_infos()
                }
            assert {EXPIRED, OVER[0], AGG_OVER[0], None} <= answers


def _state(env: Env, incoming: Any) -> CycleState:
    state = CycleState()
    env.plugin.pre_filter(state, incoming)
    return state


def test_the_arrays_follow_pods_reports_and_nodes() -> None:
    env = cluster(5, ARGS)
    check(env)
    rng = random.Random(9)
    for step in range(40):
        name = f"n{rng.randrange(120):03d}"
        action = step % 4
        if action == 0:  # a pod bound there just now: its estimate counts at once
            env.pods.put(pod(f"new-{step}", node_name=name, requests={"cpu": "3"}, scheduled_at=env.now))
        elif action == 1:
            env.report(name, age=3.0, cpu_milli=rng.randrange(30000), aggregated={("p95", "5m0s"): (9000, 0)})
        elif action == 2:
            env.metrics.remove(name)
        else:
            env.add_node(name, cpu="16", annotations=_annotation(rng))
        check(env)
    env.nodes.remove("n000")
    env.add_node("n999", cpu="4")
    env.report("n999", cpu_milli=3000)
    assert check(env) == 120
