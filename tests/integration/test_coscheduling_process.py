"""Coscheduling in the real ``koord-scheduler`` process against the test API server (with the repository's
PodGroup CRD), the issue's acceptance scenarios one after another in one process: a gang of 5 with room for
4 binds none and every member says why; a fifth node binds all 5 in one Permit release; a Strict gang's
timeout returns every waiting member to the queue while a NonStrict gang keeps its other member waiting; a
gang group of two gangs binds only once both are valid; a PodGroup's status follows the phases; and the
ClusterRole of ``deploy/scheduler/coscheduling-rbac.yaml`` allows exactly the plugin's own API traffic."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordlet.testing.agent import http_get
from koordlet.testing.wait import wait_until
from koordshared.apis.extension.coscheduling import BIND_GANG_MEMBER_COUNT, POD_GROUP_LABEL
from koordshared.testing import objects
from tests.apiserver import APIServer
from tests.apiserver.fixtures import DEFAULT_CRDS, api_server_factory  # noqa: F401
from tests.cluster.koordscheduler import running
from tests.support.paths import ROOT
from tests.support.scheduler.gangkit import member, profile
from tests.unit.deploy.test_rbac import READ_VERBS, allows, attributes, granted

pytestmark = pytest.mark.slow

DEPLOY = ROOT / "deploy" / "scheduler"
CRD = DEPLOY / "crds" / "scheduling.sigs.k8s.io_podgroups.yaml"
CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [profile()],
}


@pytest.fixture
def server(api_server_factory: Callable[..., APIServer]) -> APIServer:  # noqa: F811
    return api_server_factory(crds=[*DEFAULT_CRDS, CRD])


def pod(obj: dict[str, Any]) -> dict[str, Any]:
    """As a client creates it (no uid: the server assigns one)."""
    meta = {k: v for k, v in obj["metadata"].items() if k != "uid"}
    return {**obj, "metadata": meta}


def bound(server: APIServer) -> dict[str, str]:
    pods, _ = server.store.list("pods", "default")
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")}


def condition(server: APIServer, name: str) -> str:
    for c in server.store.get("pods", name, "default").get("status", {}).get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message"))
    return ""


def failures(server: APIServer, name: str, reason: str = "FailedScheduling") -> list[str]:
    events, _ = server.store.list("events", "default")
    return [
        str(e.get("message"))
        for e in sorted(events, key=lambda e: str(e["metadata"].get("creationTimestamp")))
        if e.get("involvedObject", {}).get("name") == name and e.get("reason") == reason
    ]


def wait(cond: Callable[[], object], log: Path, timeout: float = 30) -> None:
    assert wait_until(cond, timeout, step=0.05), log.read_text()[-3000:]


def ungate(server: APIServer, name: str) -> None:
    server.store.patch("pods", name, {"spec": {"schedulingGates": None}}, namespace="default")


def add_node(server: APIServer, name: str, cpu: str) -> None:
    server.store.create("nodes", objects.node(name, cpu, "64Gi"))


def test_gangs_in_the_process(server: APIServer, tmp_path: Path) -> None:
    for i in range(4):
        add_node(server, f"n{i}", "1")
    for i in range(5):
        server.store.create("pods", pod(member(f"g{i}", "g", 5)))
    before = len(server.requests)
    with running(tmp_path, server, CONFIG) as ks:
        log, base = ks.log_path, ks.base

        # Room for 4 of 5: none binds, every member says which gang, how many wait of how many, and why.
        # Said in each member's events: its condition holds the last round's message, and a member's
        # Unreserve rejects whoever of a later round already waits (as Koordinator's does), so the five
        # conditions need not agree at any one moment.
        def said(i: int) -> bool:
            return any(
                "gang default/g: rejected with 4 of 5 members waiting at Permit" in m
                and "Insufficient cpu" in m
                for m in failures(server, f"g{i}")
            )

        wait(lambda: all(said(i) for i in range(5)), log)
        assert bound(server) == {}
        for i in range(5):
            assert "gang default/g" in condition(server, f"g{i}")

        # A fifth node: all five bound, allowed together (each counts five members bound with it).
        add_node(server, "n4", "1")
        wait(lambda: len(bound(server)) == 5, log)
        counts = {
            server.store.get("pods", f"g{i}", "default")["metadata"]["annotations"].get(
                BIND_GANG_MEMBER_COUNT
            )
            for i in range(5)
        }
        assert counts == {"5"}

        # Timeouts. Each gang of 3 (waiting-time 4s) has one member held by a scheduling gate; the second
        # member's gate is lifted 2 s after the first started waiting.
        add_node(server, "big", "64")
        for mode, gang in (("Strict", "s"), ("NonStrict", "n")):
            server.store.create("pods", pod(member(f"{gang}0", gang, 3, mode=mode, waiting="4s", cpu="100m")))
            for i in (1, 2):
                held = member(f"{gang}{i}", gang, 3, mode=mode, waiting="4s", cpu="100m", gates=["later"])
                server.store.create("pods", pod(held))
        wait(lambda: assumed(base) == 2, log)  # s0 and n0 wait at Permit
        time.sleep(2)  # not a wait for something: it spaces the second members' deadlines from the first's
        ungate(server, "s1")
        ungate(server, "n1")
        # Strict: s1 goes back with s0, before its own wait would end; NonStrict: n1 waits until its own
        # time is up (whatever the timing, the first message each one gets says which happened).
        timed_out = "rejected due to timeout after waiting "
        wait(
            lambda: failures(server, "s1") and any(m.startswith(timed_out) for m in failures(server, "n1")),
            log,
        )
        s1, n1 = failures(server, "s1"), failures(server, "n1")
        assert s1 == [
            "gang default/s: rejected with 1 of 3 members waiting at Permit: member default/s0 waited 4s "
            "(the gang's waiting time) for the others"
        ]
        assert not any(m.startswith("gang default/n: rejected") for m in n1), n1
        assert any("keep waiting (NonStrict)" in m for m in failures(server, "n0", "GangTimeout"))
        assert not {"s0", "s1", "n0", "n1"} & set(bound(server))

        # A gang group: a is complete, b lacks a pod: nothing binds until b's second pod exists.
        group = ["default/a", "default/b"]
        for name, gang in (("a0", "a"), ("a1", "a"), ("b0", "b")):
            server.store.create("pods", pod(member(name, gang, 2, groups=group, cpu="100m")))
        wait(lambda: "only 1 pods of gang default/b exist" in condition(server, "a0"), log)
        assert not {"a0", "a1", "b0"} & set(bound(server))
        server.store.create("pods", pod(member("b1", "b", 2, groups=group, cpu="100m")))
        wait(lambda: {"a0", "a1", "b0", "b1"} <= set(bound(server)), log)
        for name in ("a0", "a1", "b0", "b1"):
            assert (
                server.store.get("pods", name, "default")["metadata"]["annotations"][BIND_GANG_MEMBER_COUNT]
                == "4"
            )

        # A PodGroup: its status follows the phases as its members are bound, run and succeed.
        server.store.create(
            "podgroups",
            {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "job", "namespace": "default"},
                "spec": {"minMember": 2},
            },
        )
        for i in range(2):
            p = objects.pod(
                f"job{i}",
                requests={"cpu": "100m"},
                labels={POD_GROUP_LABEL: "job"},
                scheduler_name="koord-scheduler",
            )
            server.store.create("pods", pod(p))
        wait(lambda: {"job0", "job1"} <= set(bound(server)), log)
        wait(lambda: phase(server) == "Scheduled", log)
        for i in range(2):
            server.store.patch(
                "pods", f"job{i}", {"status": {"phase": "Running"}}, namespace="default", subresource="status"
            )
        wait(lambda: phase(server) == "Running", log)
        for i in range(2):
            server.store.patch(
                "pods",
                f"job{i}",
                {"status": {"phase": "Succeeded"}},
                namespace="default",
                subresource="status",
            )
        wait(lambda: phase(server) == "Finished", log)
        status = server.store.get("podgroups", "job", "default")["status"]
        assert status["succeeded"] == 2 and status["scheduled"] == 2 and status["scheduleStartTime"]
    written = [
        r.body["status"]["phase"]
        for r in server.requests[before:]
        if r.method == "PATCH" and "/podgroups/job" in r.path and "phase" in (r.body or {}).get("status", {})
    ]
    assert written[:2] == ["Pending", "PreScheduling"] and written[-2:] == ["Running", "Finished"], written
    assert set(written[2:-2]) <= {"Scheduling", "Scheduled"} and "Scheduled" in written, written
    traffic = {attributes(r) for r in server.requests[before:] if "/podgroups" in r.path}
    role = [d for d in yaml.safe_load_all((DEPLOY / "coscheduling-rbac.yaml").read_text()) if d]
    (cluster_role,) = [d for d in role if d["kind"] == "ClusterRole"]
    rules = cluster_role["rules"]
    assert sorted((a.verb, a.resource) for a in traffic if not allows(rules, a)) == []
    unused = sorted(
        (a.verb, a.resource) for a in granted(rules) if a not in traffic and a.verb not in READ_VERBS
    )
    assert unused == []


def phase(server: APIServer) -> str:
    return str((server.store.get("podgroups", "job", "default").get("status") or {}).get("phase") or "")


def assumed(base: str) -> float:
    """Pods assumed (waiting at Permit or binding), from the scheduler's ``scheduler_cache_size``."""
    _, body = http_get(f"{base}/metrics")
    for line in body.decode().splitlines():
        if line.startswith('scheduler_cache_size{type="assumed_pods"}'):
            return float(line.split()[-1])
    return -1.0
