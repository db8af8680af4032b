"""The PodGroup way in memory: pods labelled with a PodGroup wait for it, bind with it, and the status
controller walks it through Koordinator's phases (one transition per look, merge-PATCHed) to Running and
Finished or Failed; the transitions themselves, case by case."""

from __future__ import annotations

from typing import Any

from koord.scheduler.plugins.coscheduling.controller import next_status
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.extension.coscheduling import PodGroupPhase
from tests.support.scheduler.gangkit import kit, messages, pg_member, pod_group

NOW = 1_700_000_000.0


def status(k: MemoryScheduler, name: str = "pg") -> dict[str, Any]:
    pg = k.informers["podgroups"].get(f"default/{name}")
    assert pg is not None
    return dict(pg.get("status") or {})


def phases(k: MemoryScheduler, name: str = "pg") -> list[str]:
    """The phases the controller wrote, in order."""
    return [
        p["status"]["phase"]
        for plural, ns, pg_name, p in k.api.object_patches
        if plural == "podgroups" and f"{ns}/{pg_name}" == f"default/{name}" and "phase" in p.get("status", {})
    ]


def set_phase(k: MemoryScheduler, name: str, phase: str) -> None:
    current = k.pods.get(f"default/{name}") or k.informers["podgroup-pods"].get(f"default/{name}")
    assert current is not None
    k.add_pod({**current, "status": {**(current.get("status") or {}), "phase": phase}})


def test_pods_wait_for_their_podgroup_and_it_walks_to_running_then_finished() -> None:
    k = kit(nodes=3)
    for i in range(3):
        k.add_pod(pg_member(f"m{i}", "pg", owner="job"))
    k.run()
    assert k.bound() == {}
    k.clock.advance(3)
    k.run()
    assert messages(k, "m0") == ["gang default/pg: PodGroup default/pg not found"]
    k.informers["podgroups"].put(pod_group("pg", 3))
    k.reconcile()  # the controller looks before the scheduler places anyone
    assert phases(k) == ["Pending", "PreScheduling", "Scheduling"]
    k.run()
    assert sorted(k.bound()) == ["default/m0", "default/m1", "default/m2"]
    assert phases(k) == ["Pending", "PreScheduling", "Scheduling", "Scheduled"]
    st = status(k)
    assert st["occupiedBy"] == "default/job"
    assert st["scheduled"] == 3 and st["running"] == 0
    assert st["scheduleStartTime"] == "2023-11-14T22:13:23Z"  # the fake clock at the Scheduling look
    for i in range(3):
        set_phase(k, f"m{i}", "Running")
    k.run()
    assert status(k)["phase"] == "Running" and status(k)["running"] == 3
    k.clock.advance(60)
    for i in range(3):
        set_phase(k, f"m{i}", "Succeeded")  # leaves the scheduler's pod cache, not the PodGroup's
    k.run()
    st = status(k)
    assert st["phase"] == "Finished" and st["succeeded"] == 3 and st["scheduled"] == 3
    assert st["scheduleStartTime"] == "2023-11-14T22:13:23Z"  # set once
    n = len(k.api.object_patches)
    set_phase(k, "m0", "Succeeded")
    k.run()
    assert len(k.api.object_patches) == n  # a finished PodGroup is left alone


def test_a_failed_member_fails_the_podgroup() -> None:
    k = kit(nodes=2)
    k.informers["podgroups"].put(pod_group("pg", 2))
    for i in range(2):
        k.add_pod(pg_member(f"m{i}", "pg"))
    k.run()
    set_phase(k, "m0", "Running")
    set_phase(k, "m1", "Failed")
    k.run()
    assert status(k)["phase"] == "Failed" and status(k)["failed"] == 1


def test_a_podgroup_with_too_few_pods_stays_pending_and_its_pods_say_so() -> None:
    k = kit(nodes=3)
    k.informers["podgroups"].put(pod_group("pg", 3, scheduleTimeoutSeconds=30))
    for i in range(2):
        k.add_pod(pg_member(f"m{i}", "pg"))
    k.run()
    k.clock.advance(3)
    k.run()
    assert status(k)["phase"] == "Pending"
    assert messages(k, "m0") == [
        "gang default/pg: only 2 pods exist, min-available is 3 (0 of 3 members waiting at Permit)"
    ]


def pg(phase: str = "", min_member: int = 2, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "pg", "namespace": "default", "creationTimestamp": "2023-11-14T00:00:00Z"},
        "spec": {"minMember": min_member},
        "status": {"phase": phase, **status} if phase else status,
    }


def member(phase: str = "Pending", node: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": "x", "namespace": "default"},
        "spec": {"nodeName": node},
        "status": {"phase": phase},
    }


def test_transitions_one_look_at_a_time() -> None:
    pending, running = member(), member("Running", "n")
    assert next_status(pg(), [], NOW)["phase"] == "Pending"
    assert next_status(pg("Pending"), [pending], NOW)["phase"] == "Pending"  # fewer than minMember
    assert next_status(pg("Pending", min_member=0), [pending, pending], NOW)["phase"] == "Pending"
    assert next_status(pg("Pending"), [pending, pending], NOW)["phase"] == "PreScheduling"
    st = next_status(pg("PreScheduling"), [pending, member("Pending", "n")], NOW)
    assert st["phase"] == "Scheduling" and st["scheduled"] == 1 and st["scheduleStartTime"]
    start = "2023-11-14T01:00:00Z"
    st = next_status(pg("Scheduling", scheduleStartTime=start), [member("Pending", "n")] * 2, NOW)
    assert st["phase"] == "Scheduled" and st["scheduleStartTime"] == start
    assert next_status(pg("Scheduled"), [running, running], NOW)["phase"] == "Running"
    assert next_status(pg("Running"), [running, member("Failed", "n")], NOW)["phase"] == "Failed"
    assert next_status(pg("Running"), [member("Succeeded", "n")] * 2, NOW)["phase"] == "Finished"
    assert next_status(pg("Running"), [], NOW)["phase"] == "Pending"
    assert PodGroupPhase.UNKNOWN.value == "Unknown"  # defined by the API, never written by the controller
