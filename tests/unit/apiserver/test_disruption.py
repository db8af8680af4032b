"""The in-server disruption controller and the eviction rules that read its status, on a bare store with
a controllable clock (``pkg/controller/disruption/disruption.go``, ``pkg/registry/core/pod/storage/
eviction.go``)."""

from __future__ import annotations

import types
from typing import Any

import pytest

from tests.apiserver import eviction
from tests.apiserver.disruption import DisruptionController
from tests.apiserver.resources import Registry
from tests.apiserver.status import APIError
from tests.apiserver.store import Store
from tests.unit.apiserver.helpers import pod

PDBS = "poddisruptionbudgets.policy"


class Clock:
    def __init__(self) -> None:
        self.now = 1767225600.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def env() -> Any:
    clock = Clock()
    store = Store(Registry(), clock=clock)
    controller = DisruptionController(store)
    return types.SimpleNamespace(store=store, clock=clock, controller=controller, evictions_blocked=False)


def _pods(store: Store, n: int, *, ready: bool = True) -> None:
    for i in range(n):
        p = pod(f"w{i}", app="web")
        p["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}
        store.create("pods", p)


def _pdb(store: Store, **spec: Any) -> dict[str, Any]:
    body = {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
    }
    store.create(PDBS, body, keep_status=False)
    return store.get(PDBS, "web", "default")["status"]


def _evict(env: Any, name: str) -> int:
    code, _ = eviction.evict(env, "default", name, {"metadata": {"name": name}}, dry_run=False)
    return code


def test_percentages_scale_by_the_matching_pods(env: Any) -> None:
    _pods(env.store, 4)
    st = _pdb(env.store, maxUnavailable="50%")
    assert (st["expectedPods"], st["desiredHealthy"], st["disruptionsAllowed"]) == (4, 2, 2)
    env.store.patch(
        PDBS, "web", {"spec": {"maxUnavailable": None, "minAvailable": "80%"}}, namespace="default"
    )
    st = env.store.get(PDBS, "web", "default")["status"]
    assert (st["desiredHealthy"], st["disruptionsAllowed"], st["observedGeneration"]) == (4, 0, 2)
    cond = {c["type"]: c for c in st["conditions"]}["DisruptionAllowed"]
    assert (cond["status"], cond["reason"]) == ("False", "InsufficientPods")


def test_a_null_selector_matches_nothing_and_an_empty_one_everything(env: Any) -> None:
    _pods(env.store, 2)
    env.store.create(
        PDBS, {"metadata": {"name": "none", "namespace": "default"}, "spec": {}}, keep_status=False
    )
    env.store.create(
        PDBS,
        {"metadata": {"name": "all", "namespace": "default"}, "spec": {"selector": {}}},
        keep_status=False,
    )
    assert env.store.get(PDBS, "none", "default")["status"]["expectedPods"] == 0
    assert env.store.get(PDBS, "all", "default")["status"]["expectedPods"] == 2


def test_disrupted_pods_stop_counting_until_deleted_or_two_minutes_pass(env: Any) -> None:
    _pods(env.store, 3)
    _pdb(env.store, minAvailable=1)
    env.controller.pause()  # an eviction the pod deletion does not follow (e.g. the delete failed)
    env.store.guaranteed_update(
        PDBS,
        "web",
        "default",
        lambda p: {**p, "status": {**p["status"], "disruptedPods": {"w0": "2026-01-01T00:00:00Z"}}},
    )
    env.controller.resume()
    assert env.store.get(PDBS, "web", "default")["status"]["currentHealthy"] == 2
    env.clock.now += 121
    env.controller.sync_all()
    st = env.store.get(PDBS, "web", "default")["status"]
    assert st["currentHealthy"] == 3 and "disruptedPods" not in st


def test_unready_pods_and_the_unhealthy_pod_eviction_policy(env: Any) -> None:
    _pods(env.store, 2)
    _pods_unready = pod("sick", app="web")
    _pods_unready["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}
    env.store.create("pods", _pods_unready)
    _pdb(env.store, minAvailable=2)  # 2 healthy, 2 needed: no budget
    with pytest.raises(APIError) as err:
        _evict(env, "w0")
    assert err.value.code == 429
    # IfHealthyBudget: the unready pod may go because the healthy ones meet the budget
    assert _evict(env, "sick") == 201
    assert env.store.get("pods", "sick", "default")["metadata"]["deletionTimestamp"]


def test_always_allow_lets_unready_pods_go_below_the_budget(env: Any) -> None:
    _pods(env.store, 1)
    sick = pod("sick", app="web")
    sick["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}
    env.store.create("pods", sick)
    _pdb(env.store, minAvailable=3, unhealthyPodEvictionPolicy="AlwaysAllow")  # 1 healthy of 3 needed
    assert _evict(env, "sick") == 201
    with pytest.raises(APIError):
        _evict(env, "w0")


def test_negative_budget_is_forbidden(env: Any) -> None:
    _pods(env.store, 1)
    _pdb(env.store, minAvailable=0)
    env.controller.pause()
    env.store.guaranteed_update(
        PDBS, "web", "default", lambda p: {**p, "status": {**p["status"], "disruptionsAllowed": -1}}
    )
    with pytest.raises(APIError) as err:
        _evict(env, "w0")
    assert err.value.code == 403
