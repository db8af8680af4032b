"""The ``SchedulingBasic`` cluster (:mod:`.basic`) divided among 20 ElasticQuotas: each quota a min of
1/80 of the cluster's cpu and a max of 1/10, one of them small (max 5 cpu) so that part of its pods is
refused by the quota (and tries preemption inside it, which finds no victim among pods of equal
priority). Pods are ``pod-default.yaml``'s, labelled round robin into the quotas; the profile is the default
one with ElasticQuota added and Koordinator's PostFilter order (ElasticQuota, then DefaultPreemption)."""

from __future__ import annotations

import time
from typing import Any

from bench.workloads import basic
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.extension import elasticquota as eq
from koordshared.testing.objects import elastic_quota

QUOTAS = 20
SMALL = "quota-19"
NAMESPACE = "sched-perf"


def cluster(nodes: int, placed: int, **kwargs: Any) -> MemoryScheduler:
    # Koordinator's PostFilter order: ElasticQuota's preemption, then DefaultPreemption.
    post = {"disabled": [{"name": "*"}], "enabled": [{"name": "ElasticQuota"}, {"name": "DefaultPreemption"}]}
    plugins = {"multiPoint": {"enabled": [{"name": "ElasticQuota"}]}, "postFilter": post}
    profile = {"schedulerName": basic.SCHEDULER, "plugins": plugins}
    kit = MemoryScheduler({"profiles": [profile]}, **kwargs)
    cpu = nodes * 4
    for q in range(QUOTAS):
        name = f"quota-{q:02d}"
        maximum = "5" if name == SMALL else str(cpu // 10)
        obj = elastic_quota(
            name, namespace=NAMESPACE, minimum={"cpu": str(cpu // 80)}, maximum={"cpu": maximum}
        )
        kit.informers["elasticquotas"].put(obj)
    for i in range(nodes):
        kit.add_node(basic.node(i))
    for i in range(placed):
        kit.add_pod(basic.pod(f"init-{i}", node_name=f"node-{i % nodes:05d}"))
    return kit


def pod(i: int) -> dict[str, Any]:
    out = basic.pod(f"q-{i}")
    out["metadata"]["labels"] = {eq.LABEL_QUOTA_NAME: f"quota-{i % QUOTAS:02d}"}
    return out


def algorithm(nodes: int, placed: int, pods: int, *, plain: float) -> dict[str, Any]:
    """Pods/s with the quotas, beside ``plain`` (the same cluster's pods/s without them, this run)."""
    t0 = time.perf_counter()
    kit = cluster(nodes, placed, parallelism=16)
    setup = time.perf_counter() - t0
    run = basic.schedule_all(kit, pod, pods)
    kit.stop()
    attempted = len(run["cycles"])
    refused = pods - run["bound"]
    small_pods = len(range(QUOTAS - 1, pods, QUOTAS))
    assert refused == small_pods - 50, (refused, small_pods)  # the small quota admits 5 cpu of 100m pods
    res = {
        f"quota_pods_per_s_{nodes}": round(attempted / run["wall"], 1),
        f"quota_bound_{nodes}": run["bound"],
        f"quota_refused_{nodes}": refused,
        f"quota_cycle_p50_ms_{nodes}": _pct(run["cycles"], 0.5),
        f"quota_setup_s_{nodes}": round(setup, 1),
    }
    print(
        f"quota, {nodes} nodes, {QUOTAS} quotas, {placed} placed, {pods} pods: "
        f"{res[f'quota_pods_per_s_{nodes}']} pods/s ({run['bound']} bound, {refused} refused by quota), "
        f"cycle p50 {res[f'quota_cycle_p50_ms_{nodes}']} ms (plain workload, same run: {plain} pods/s)",
        flush=True,
    )
    return res


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return round(s[min(int(q * len(s)), len(s) - 1)] * 1000, 2) if s else 0.0
