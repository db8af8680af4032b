"""Pod requests as Kubernetes' PodRequests computes them (containers, sidecars, init peak, overhead)."""

from __future__ import annotations

from typing import Any

from koordshared.apis.core.pod import pod_requests


def c(cpu: str | None = None, mem: str | None = None, **extra: Any) -> dict[str, Any]:
    req = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v is not None}
    return {"name": "c", "resources": {"requests": req}, **extra}


def pod(containers: list[Any], init: list[Any] | None = None, overhead: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init is not None:
        spec["initContainers"] = init
    if overhead is not None:
        spec["overhead"] = overhead
    return {"spec": spec}


def test_app_containers_sum() -> None:
    assert pod_requests(pod([c("500m", "1Gi"), c("1.5", "512Mi")])) == (2000, 1536 * 2**20)


def test_init_container_peak_wins_when_larger() -> None:
    assert pod_requests(pod([c("1", "1Gi")], init=[c("3", "512Mi")])) == (3000, 2**30)


def test_sidecars_run_alongside_and_count_in_later_init_steps() -> None:
    sidecar = c("500m", "100Mi", restartPolicy="Always")
    # app 1 CPU + sidecar 0.5 = 1.5; init step after the sidecar = 2 + 0.5 = 2.5 -> peak wins for CPU
    got = pod_requests(pod([c("1", "1Gi")], init=[sidecar, c("2", "10Mi")]))
    assert got == (2500, 2**30 + 100 * 2**20)


def test_overhead_added_and_junk_ignored() -> None:
    p = pod([c("250m", "x"), {"name": "bare"}, "junk"], overhead={"cpu": "100m", "memory": "64Mi"})
    assert pod_requests(p) == (350, 64 * 2**20)
    assert pod_requests({}) == (0, 0)
