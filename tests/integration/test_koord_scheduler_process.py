"""The real ``koord-scheduler`` process against the test API server, through every extension point with
plugins written for these tests and installed from a wheel (``tests/fixtures/scheduler_points_dist``):
a PreEnqueue gate, a Permit that waits and is allowed by another pod's Permit, one that times out, two
PreBind plugins whose changes go out as one PATCH, a Bind that fails."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from koordlet.testing.wait import wait_until
from tests.apiserver import APIServer
from tests.cluster.koordscheduler import (
    Cluster,
    bindings,
    calls,
    condition,
    configuration,
    events_for,
    node_of,
)
from tests.integration.koordscheduler_env import Start, holding, profile

GATE, OPEN = "points.test/gate", "points.test/open"


def bound(server: APIServer, name: str, timeout: float = 30.0) -> str:
    """The node ``name`` is bound to, waiting for it; fails after ``timeout``."""
    assert wait_until(lambda: node_of(server, name), timeout, step=0.05), f"{name} not bound in {timeout}s"
    return node_of(server, name)


def flaky_binder(plugins: dict[str, Any], trace: Path) -> dict[str, Any]:
    """The profile with FlakyBind before DefaultBinder, as Koordinator's profile puts Reservation before
    it (``disabled: ["*"]``, then both in order)."""
    plugins["plugins"]["bind"] = {
        "disabled": [{"name": "*"}],
        "enabled": [{"name": "FlakyBind"}, {"name": "DefaultBinder"}],
    }
    plugins["pluginConfig"].append({"name": "FlakyBind", "args": {"trace": str(trace)}})
    return plugins


def test_a_gated_pod_waits_for_its_label(
    api_server: APIServer, cluster: Cluster, schedulers: Start, tmp_path: Path
) -> None:
    trace = tmp_path / "trace"
    cluster.node("n1")
    ks = schedulers(configuration(profile(trace, {"preEnqueue": ["GateOnLabel"]})))
    cluster.pod("gated", labels={GATE: "x"})
    assert wait_until(lambda: calls(trace, "preEnqueue", "default/gated"), 30, step=0.05)
    assert wait_until(lambda: ks.metric("scheduler_pending_pods", queue="gated") == 1, 30, step=0.1)
    cluster.pod("free")
    assert bound(api_server, "free") == "n1"  # the queue moves on past the gated pod
    assert node_of(api_server, "gated") == ""
    assert not events_for(api_server, "gated", "FailedScheduling")  # gated: never attempted

    cluster.label("gated", {OPEN: "now"})
    assert bound(api_server, "gated") == "n1"
    assert ks.metric("scheduler_pending_pods", queue="gated") == 0
    assert ks.stop() == 0


def test_permit_waits_until_a_second_pod_allows_it(
    api_server: APIServer, cluster: Cluster, schedulers: Start, tmp_path: Path
) -> None:
    trace = tmp_path / "trace"
    cluster.node("n1")
    schedulers(configuration(profile(trace, {"permit": ["Pair"], "reserve": ["Recorder"]})))
    cluster.pod("first", labels={"points.test/pair": "g"})
    assert wait_until(lambda: calls(trace, "permit", "default/first", "wait"), 30, step=0.05)
    cluster.pod("other")
    bound(api_server, "other")  # scheduling goes on while a pod waits at Permit, no thread held
    assert node_of(api_server, "first") == ""

    cluster.pod("second", labels={"points.test/pair": "g"})
    assert bound(api_server, "first") == bound(api_server, "second") == "n1"
    assert calls(trace, "permit", "default/second", "allowed default/first")
    assert not calls(trace, "unreserve")
    assert sorted(k for k, _ in bindings(api_server)) == ["default/first", "default/other", "default/second"]


def test_a_permit_timeout_unreserves_and_requeues_without_binding(
    api_server: APIServer, cluster: Cluster, schedulers: Start, tmp_path: Path
) -> None:
    trace = tmp_path / "trace"
    cluster.node("n1")
    ks = schedulers(
        configuration(profile(trace, {"permit": ["Pair"], "reserve": ["Recorder"]}, {"Pair": {"timeout": 1}}))
    )
    cluster.pod("alone", labels={"points.test/pair": "solo"})
    assert wait_until(lambda: calls(trace, "unreserve", "default/alone"), 30, step=0.05)
    (waited,) = calls(trace, "permit", "default/alone", "wait")
    (unreserved,) = calls(trace, "unreserve", "default/alone")
    assert unreserved["t"] - waited["t"] >= 1.0  # the timeout, not sooner
    assert wait_until(lambda: events_for(api_server, "alone", "FailedScheduling"), 10, step=0.05)
    (event,) = events_for(api_server, "alone", "FailedScheduling")
    assert "timeout" in event["message"] and "Pair" in event["message"], event
    assert wait_until(lambda: condition(api_server, "alone").get("reason") == "Unschedulable", 10, step=0.05)
    assert ks.metric("scheduler_cache_size", type="assumed_pods") == 0  # forgotten: its room is free
    assert ks.metric("scheduler_pending_pods", queue="unschedulable") == 1

    cluster.node("n2")  # any cluster event moves it (Pair registers none)
    assert wait_until(lambda: len(calls(trace, "permit", "default/alone", "wait")) == 2, 30, step=0.05)
    assert node_of(api_server, "alone") == "" and not bindings(api_server, None)


def test_prebind_changes_go_out_in_one_patch_before_the_binding(
    api_server: APIServer, cluster: Cluster, schedulers: Start, tmp_path: Path
) -> None:
    trace = tmp_path / "trace"
    cluster.node("n1")
    schedulers(configuration(profile(trace, {"preBind": ["StampLabel", "StampAnnotation"]})))
    cluster.pod("stamped")
    assert bound(api_server, "stamped") == "n1"
    pod = api_server.store.get("pods", "stamped", "default")
    assert pod["metadata"]["labels"]["points.test/stamped"] == "true"
    assert pod["metadata"]["annotations"]["points.test/node"] == "n1"
    writes = [
        (r.method, r.path.rsplit("/", 1)[-1], r.body)
        for r in api_server.requests
        if r.method in ("PATCH", "POST") and "/pods/stamped" in r.path and not r.path.endswith("/status")
    ]
    assert writes == [
        (
            "PATCH",
            "stamped",
            {
                "metadata": {
                    "labels": {"points.test/stamped": "true"},
                    "annotations": {"points.test/node": "n1"},
                }
            },
        ),
        ("POST", "binding", writes[1][2]),
    ]


def test_a_failing_bind_is_retried_with_backoff_and_binds_once(
    api_server: APIServer, cluster: Cluster, schedulers: Start, tmp_path: Path
) -> None:
    trace = tmp_path / "trace"
    cluster.node("n1")
    plugins = profile(trace, {"reserve": ["Recorder"], "postBind": ["Recorder"]})
    ks = schedulers(configuration(flaky_binder(plugins, trace)))
    cluster.pod("flaky", labels={"points.test/fail-bind": "2"})
    assert bound(api_server, "flaky") == "n1"
    tries = calls(trace, "bind", "default/flaky")
    assert [c["result"] for c in tries] == ["error", "error", "skip"]  # then DefaultBinder bound it
    # unreserved after each failure, retried after kube-scheduler's backoff: 1 s, then 2 s
    assert len(calls(trace, "unreserve", "default/flaky")) == 2
    assert tries[1]["t"] - tries[0]["t"] >= 1.0 and tries[2]["t"] - tries[1]["t"] >= 2.0
    assert wait_until(lambda: calls(trace, "postBind", "default/flaky"), 10, step=0.05)
    assert bindings(api_server, None) == [("default/flaky", "n1")]
    failed = sorted(e["message"] for e in events_for(api_server, "flaky", "FailedScheduling"))
    assert [m.rsplit(": ", 1)[-1] for m in failed] == ["injected bind failure 1", "injected bind failure 2"]
    assert all("FlakyBind" in m for m in failed)
    assert ks.metric("scheduler_schedule_attempts_total", result="error", profile="koord-scheduler") == 2
    assert ks.metric("scheduler_schedule_attempts_total", result="scheduled", profile="koord-scheduler") == 1


def test_a_failed_binding_frees_the_room_for_a_pod_waiting_for_it(
    api_server: APIServer, cluster: Cluster, schedulers: Start, tmp_path: Path
) -> None:
    trace, release, plugins = holding(tmp_path)
    cluster.node("n1", cpu="2")
    ks = schedulers(configuration(flaky_binder(plugins, trace)))
    cluster.pod("doomed", cpu="2", labels={"points.test/hold": "1", "points.test/fail-bind": "always"})
    assert wait_until(lambda: calls(trace, "preBind", "default/doomed", "held"), 30, step=0.05)
    cluster.pod("waiter", cpu="2")
    assert wait_until(lambda: events_for(api_server, "waiter", "FailedScheduling"), 30, step=0.05)
    assert "Insufficient cpu" in events_for(api_server, "waiter", "FailedScheduling")[0]["message"]
    started = time.monotonic()
    (release / "doomed").touch()
    # the failed binding is an assigned pod's deletion to the waiting pod: it is retried at once (after
    # its 1 s backoff), not at the 5-minute flush
    assert bound(api_server, "waiter", 30) == "n1"
    assert time.monotonic() - started < 30
    assert calls(trace, "unreserve", "default/doomed")
    assert node_of(api_server, "doomed") == "" and ks.metric("scheduler_cache_size", type="assumed_pods") == 0
    assert [k for k, _ in bindings(api_server, None)] == ["default/waiter"]
