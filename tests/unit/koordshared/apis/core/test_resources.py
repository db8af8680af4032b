"""Resource lists of every name: PodRequests/PodLimits as Kubernetes computes them (containers, sidecars,
init peak, overhead; extended names, limits) and a node's allocatable with the raw-allocatable annotation
laid over it."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from koordshared.apis.core.resources import (
    node_allocatable,
    parse_resource_list,
    pod_limits_list,
    pod_requests,
    pod_requests_list,
    value_of,
)

BATCH_CPU = "kubernetes.io/batch-cpu"


def ctr(req: dict[str, str] | None = None, lim: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": req or {}, "limits": lim or {}}, **extra}


def pod(containers: list[Any], init: list[Any] | None = None, overhead: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers, "initContainers": init or []}
    if overhead is not None:
        spec["overhead"] = overhead
    return {"spec": spec}


def test_extended_names_sum_and_reduce_like_the_vectorizer() -> None:
    p = pod([ctr({BATCH_CPU: "1000", "memory": "1Gi"}), ctr({BATCH_CPU: "500", "cpu": "250m"})])
    req = pod_requests_list(p)
    assert value_of(BATCH_CPU, req[BATCH_CPU]) == 1500  # already millicores: Value(), not MilliValue()
    assert value_of("cpu", req["cpu"]) == 250
    assert value_of("memory", req["memory"]) == 2**30


def test_requests_agree_with_the_cpu_memory_helper() -> None:
    sidecar = ctr({"cpu": "200m", "memory": "64Mi"}, restartPolicy="Always")
    p = pod(
        [ctr({"cpu": "1", "memory": "1Gi"})],
        init=[sidecar, ctr({"cpu": "3", "memory": "128Mi"})],
        overhead={"cpu": "100m", "memory": "10Mi"},
    )
    req = pod_requests_list(p)
    assert {n: value_of(n, q) for n, q in req.items()} == pod_requests(p)
    # init peak: 3 cpu + the sidecar started before it (200m) beats 1 + 0.2; plus 100m overhead
    assert value_of("cpu", req["cpu"]) == 3300


def c(cpu: str | None = None, mem: str | None = None, **extra: Any) -> dict[str, Any]:
    return ctr({k: v for k, v in (("cpu", cpu), ("memory", mem)) if v is not None}, **extra)


def test_app_containers_sum() -> None:
    assert pod_requests(pod([c("500m", "1Gi"), c("1.5", "512Mi")])) == {"cpu": 2000, "memory": 1536 * 2**20}


def test_init_container_peak_wins_when_larger() -> None:
    assert pod_requests(pod([c("1", "1Gi")], init=[c("3", "512Mi")])) == {"cpu": 3000, "memory": 2**30}


def test_sidecars_run_alongside_and_count_in_later_init_steps() -> None:
    sidecar = c("500m", "100Mi", restartPolicy="Always")
    # app 1 CPU + sidecar 0.5 = 1.5; init step after the sidecar = 2 + 0.5 = 2.5 -> peak wins for CPU
    got = pod_requests(pod([c("1", "1Gi")], init=[sidecar, c("2", "10Mi")]))
    assert got == {"cpu": 2500, "memory": 2**30 + 100 * 2**20}


def test_overhead_added_and_junk_ignored() -> None:
    p = pod([c("250m", "x"), {"name": "bare"}, "junk"], overhead={"cpu": "100m", "memory": "64Mi"})
    assert pod_requests(p) == {"cpu": 350, "memory": 64 * 2**20}
    assert pod_requests({}) == {}


def test_fractional_millicores_round_once_over_the_sum() -> None:
    # Kubernetes sums exactly and rounds the sum up (MilliValue): 0.5m + 0.5m is 1m, not 2m.
    p = pod([c("0.5m"), c("0.5m")])
    assert pod_requests(p) == {"cpu": 1}
    assert pod_requests(pod([c("0.5m"), c("1")])) == {"cpu": 1001}


def test_limits_take_overhead_only_where_limited() -> None:
    p = pod([ctr(lim={"cpu": "2"})], overhead={"cpu": "100m", "memory": "10Mi"})
    lim = pod_limits_list(p)
    assert lim == {"cpu": Fraction(21, 10)}  # memory is unlimited, so the overhead does not create a limit


def test_limits_init_peak_and_sidecars() -> None:
    p = pod(
        [ctr(lim={"memory": "1Gi"})],
        init=[ctr(lim={"memory": "256Mi"}, restartPolicy="Always"), ctr(lim={"memory": "2Gi"})],
    )
    assert value_of("memory", pod_limits_list(p)["memory"]) == 2 * 2**30 + 256 * 2**20


def test_bad_quantities_are_left_out() -> None:
    assert parse_resource_list({"cpu": "lots", "memory": "1Ki", "x": None}) == {"memory": Fraction(1024)}
    assert parse_resource_list(["not", "a", "map"]) == {}


def node(alloc: dict[str, str], raw: Any = None) -> dict[str, Any]:
    ann = (
        {}
        if raw is None
        else {"node.koordinator.sh/raw-allocatable": raw if isinstance(raw, str) else json.dumps(raw)}
    )
    return {"metadata": {"name": "n", "annotations": ann}, "status": {"allocatable": alloc}}


def test_raw_allocatable_overrides_entries() -> None:
    got = node_allocatable(node({"cpu": "32", "memory": "64Gi", "pods": "110"}, {"cpu": "16"}))
    assert got == {"cpu": Fraction(16), "memory": Fraction(64 * 2**30), "pods": Fraction(110)}


def test_raw_allocatable_ignored_when_broken() -> None:
    base = {"cpu": "32", "memory": "64Gi"}
    want = {"cpu": Fraction(32), "memory": Fraction(64 * 2**30)}
    assert node_allocatable(node(base, "{not json")) == want
    assert node_allocatable(node(base, {"cpu": "sixteen"})) == want
    assert node_allocatable(node(base, {})) == want
    assert node_allocatable({"status": {}}) == {}
