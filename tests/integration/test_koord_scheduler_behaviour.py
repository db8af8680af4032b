"""What an operator sees of the real ``koord-scheduler`` process, as kube-scheduler shows it: ``Scheduled``
and ``FailedScheduling`` Events, the ``PodScheduled=False`` condition in kube-scheduler's words, its
metric names, ``/healthz``, ``/readyz``, ``/debug/explain``; pods of other schedulers left alone; a
malformed pod that never stops the queue; several profiles; a bad configuration refused naming the field."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from koordlet.testing.wait import wait_until
from koordshared.testing import objects
from tests.apiserver import APIServer
from tests.cluster.koordscheduler import (
    SCHEDULER,
    Cluster,
    bindings,
    condition,
    configuration,
    events_for,
    node_of,
)
from tests.integration.koordscheduler_env import Start

GPU_TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
KUBE_METRICS = (
    "scheduler_schedule_attempts_total",
    "scheduler_scheduling_attempt_duration_seconds",
    "scheduler_pending_pods",
    "scheduler_plugin_execution_duration_seconds",
    "scheduler_framework_extension_point_duration_seconds",
    "scheduler_pod_scheduling_attempts",
    "scheduler_pod_scheduling_sli_duration_seconds",
    "scheduler_preemption_attempts_total",
    "scheduler_preemption_victims",
    "scheduler_unschedulable_pods",
    "scheduler_cache_size",
)


def bound(server: APIServer, name: str, timeout: float = 30.0) -> str:
    assert wait_until(lambda: node_of(server, name), timeout, step=0.05), f"{name} not bound in {timeout}s"
    return node_of(server, name)


def failed(server: APIServer, name: str, timeout: float = 30.0) -> dict[str, Any]:
    """The pod's ``FailedScheduling`` Event (waiting for it)."""
    assert wait_until(lambda: events_for(server, name, "FailedScheduling"), timeout, step=0.05), name
    return events_for(server, name, "FailedScheduling")[0]


def test_events_condition_metrics_and_endpoints_as_kube_scheduler_shows_them(
    api_server: APIServer, cluster: Cluster, schedulers: Start
) -> None:
    cluster.node("n1", cpu="2")
    cluster.node("n2", cpu="8", taints=[GPU_TAINT])
    cluster.pod("fits", cpu="1")  # listed at start (a list's items name no kind), not watched
    cluster.pod("big", cpu="4")
    ks = schedulers()
    assert bound(api_server, "fits") == "n1"
    assert wait_until(lambda: events_for(api_server, "fits", "Scheduled"), 10, step=0.05)
    (scheduled,) = events_for(api_server, "fits", "Scheduled")
    assert (
        scheduled["type"] == "Normal" and scheduled["message"] == "Successfully assigned default/fits to n1"
    )
    # events.k8s.io/v1 as kube-scheduler's profile recorder writes it (seen here through core v1)
    assert (scheduled["reportingComponent"], scheduled["action"]) == ("koord-scheduler", "Binding")
    assert scheduled["reportingInstance"].startswith("koord-scheduler-") and scheduled["eventTime"]
    assert (scheduled["involvedObject"]["kind"], scheduled["involvedObject"]["apiVersion"]) == ("Pod", "v1")
    assert condition(api_server, "fits")["status"] == "True"

    event = failed(api_server, "big")
    assert (event["involvedObject"]["kind"], event["action"]) == ("Pod", "Scheduling")
    why = (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s). "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert event["type"] == "Warning" and event["message"] == why, event["message"]
    # kubectl get events --field-selector involvedObject.kind=Pod (or regarding.kind=Pod) finds them
    by_kind, _ = api_server.store.list("events", "default", field_selector="involvedObject.kind=Pod")
    assert {"fits", "big"} <= {e["involvedObject"]["name"] for e in by_kind}
    new_api, _ = api_server.store.list("events.events.k8s.io", "default", field_selector="regarding.kind=Pod")
    assert {e["regarding"]["name"] for e in new_api} == {e["involvedObject"]["name"] for e in by_kind}
    assert wait_until(lambda: condition(api_server, "big").get("status") == "False", 10, step=0.05)
    cond = condition(api_server, "big")
    assert (cond["reason"], cond["message"]) == ("Unschedulable", event["message"])
    assert node_of(api_server, "big") == ""

    status, text = ks.get("/metrics")
    assert status == 200
    missing = [m for m in KUBE_METRICS if f"# TYPE {m} " not in text]
    assert not missing, missing
    profile = "koord-scheduler"
    assert ks.wait_metric("scheduler_schedule_attempts_total", 1, result="scheduled", profile=profile)
    assert ks.metric("scheduler_schedule_attempts_total", result="unschedulable", profile=profile) >= 1
    assert ks.wait_metric("scheduler_pending_pods", 1, queue="unschedulable")
    assert ks.metric("scheduler_cache_size", type="nodes") == 2
    assert ks.metric("scheduler_pod_scheduling_sli_duration_seconds_count", attempts="1") == 1
    assert ks.metric("scheduler_plugin_execution_duration_seconds_count", plugin="NodeResourcesFit") > 0
    assert ks.get("/healthz") == (200, "ok\n") and ks.get("/readyz") == (200, "ok\n")

    status, body = ks.get("/debug/explain?pod=default/big")
    assert status == 200, body
    doc = json.loads(body)
    assert doc["profile"] == "koord-scheduler" and set(doc["nodes"]) == {"n1", "n2"}
    verdicts = {n: {v["plugin"]: v["filter"] for v in d["filter"]} for n, d in doc["nodes"].items()}
    assert verdicts["n1"]["NodeResourcesFit"] == "Insufficient cpu"
    assert verdicts["n2"]["TaintToleration"] == "node(s) had untolerated taint(s)"
    assert not any(d["passes"] for d in doc["nodes"].values())
    assert ks.get("/debug/explain?pod=default/nope")[0] == 404
    assert ks.get("/debug/explain?pod=nope")[0] == 400
    assert ks.stop() == 0
    # Once synced and before the first cycle, the caches left the garbage collector's view.
    text = ks.log_path.read_text()
    settled = re.search(r"heap settled: (\d+) objects frozen", text)
    assert settled is not None and int(settled.group(1)) > 0, text[-3000:]
    assert text.index("heap settled") < text.index("leading: scheduling pods")


def test_pods_of_other_schedulers_are_left_alone(
    api_server: APIServer, cluster: Cluster, schedulers: Start
) -> None:
    cluster.node("n1")
    ks = schedulers()
    cluster.pod("kubes", scheduler="default-scheduler")
    cluster.pod("elses", scheduler="someone-else")
    cluster.pod("ours")
    assert bound(api_server, "ours") == "n1"  # created last, so the others had their turn
    assert ks.metric("scheduler_pending_pods", queue="active") == 0
    for name in ("kubes", "elses"):
        assert node_of(api_server, name) == ""
        touched = [r for r in api_server.requests if f"/pods/{name}" in r.path and r.method != "GET"]
        assert not touched and not events_for(api_server, name, "FailedScheduling"), touched
        assert condition(api_server, name) == {}
    assert ks.get("/debug/explain?pod=default/kubes")[0] == 409


def test_a_malformed_pod_never_stops_the_queue(
    api_server: APIServer, cluster: Cluster, schedulers: Start
) -> None:
    """Pods kube-apiserver would refuse, written straight into the store (a corrupt object a watch could
    still deliver): each fails its own attempt with an error, and the pods after them are scheduled."""
    cluster.node("n1")
    ks = schedulers()
    corrupt = (("bad-affinity", "affinity", "not an object"), ("bad-selector", "nodeSelector", "x"))
    for name, field, value in corrupt:
        bad = objects.pod(name, requests={"cpu": "100m"}, scheduler_name=SCHEDULER)
        del bad["metadata"]["uid"], bad["status"]
        bad["spec"][field] = value
        api_server.store.create("pods", bad, "default", keep_status=False, corrupt=True)
    for i in range(3):
        cluster.pod(f"good-{i}")
    for i in range(3):
        assert bound(api_server, f"good-{i}") == "n1"
    for name in ("bad-affinity", "bad-selector"):
        failed(api_server, name)
        assert node_of(api_server, name) == ""
    assert ks.alive() and ks.get("/readyz")[0] == 200
    # they stay in the queue, retried after their backoff, and the queue keeps moving
    cluster.pod("late")
    assert bound(api_server, "late") == "n1"
    assert ks.stop() == 0


def test_each_profile_schedules_its_own_pods(
    api_server: APIServer, cluster: Cluster, schedulers: Start
) -> None:
    def fit(strategy: str) -> dict[str, Any]:
        return {
            "name": "NodeResourcesFit",
            "args": {"scoringStrategy": {"type": strategy, "resources": [{"name": "cpu", "weight": 1}]}},
        }

    off = {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}}
    spread = {
        "schedulerName": "koord-scheduler",
        "plugins": off,
        "pluginConfig": [fit("LeastAllocated")],
    }
    pack = {"schedulerName": "koord-binpack", "plugins": off, "pluginConfig": [fit("MostAllocated")]}
    cluster.node("busy", cpu="4")
    cluster.node("idle", cpu="4")
    cluster.pod("resident", cpu="2", scheduler="kube-scheduler", nodeName="busy")
    ks = schedulers(configuration(spread, pack))
    cluster.pod("spread-me", cpu="500m")
    cluster.pod("pack-me", cpu="500m", scheduler="koord-binpack")
    assert bound(api_server, "spread-me") == "idle"
    assert bound(api_server, "pack-me") == "busy"
    for profile in ("koord-scheduler", "koord-binpack"):
        assert ks.wait_metric("scheduler_schedule_attempts_total", 1, result="scheduled", profile=profile)
    assert sorted(bindings(api_server)) == [("default/pack-me", "busy"), ("default/spread-me", "idle")]


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2}, "podMaxBackoffSeconds"),
        ({"profiles": [{"percentageOfNodesToScore": 101}]}, "profiles[0].percentageOfNodesToScore"),
        ({"profiles": [{"plugins": {"filter": {"enabled": [{"name": "Nope"}]}}}]}, "Nope"),
        ({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]}, "profiles[1].schedulerName"),
        ({"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"typo": 1}}]}]}, "typo"),
        ({"parallelism": 0}, "parallelism"),
    ],
)
def test_a_bad_configuration_exits_2_naming_the_field(
    tmp_path: Path, config: dict[str, Any], named: str
) -> None:
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(configuration(**config) if "profiles" not in config else {**configuration(), **config})
    )
    done = subprocess.run(
        [sys.executable, "-m", "koord.scheduler", f"--config={path}", "--addr=127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KUBECONFIG": str(tmp_path / "none")},
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert named in done.stderr, done.stderr
