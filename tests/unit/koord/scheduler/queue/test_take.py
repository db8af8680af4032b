"""The queue's side of Koordinator's NextPod and Activate: a named pod is handed over wherever it waits
(active, backoff, unschedulable, or gated by the plugin asking), never one another plugin gates; an
activated gated pod is checked again by its PreEnqueue plugins."""

from __future__ import annotations

from typing import Any

from koord.scheduler.framework import Status
from koord.scheduler.plugins.queuesort import PrioritySort
from koord.scheduler.queue.queue import SchedulingQueue
from koordshared.testing import FakeClock, pod

SORT = PrioritySort(None, None)


def queue(held: dict[str, str]) -> SchedulingQueue:
    """PreEnqueue: pod name -> the plugin that gates it (absent: let through)."""

    def gate(p: Any) -> Status | None:
        plugin = held.get(p["metadata"]["name"])
        return None if plugin is None else Status.unresolvable("held").with_plugin(plugin)

    return SchedulingQueue(SORT.less, gate, lambda p: {}, clock=FakeClock())


def test_take_hands_over_a_pod_wherever_it_waits_unless_another_plugin_gates_it() -> None:
    held = {"mine": "Coscheduling", "theirs": "SchedulingGates"}
    q = queue(held)
    pods = {n: pod(n, uid=n) for n in ("active", "backoff", "mine", "theirs")}
    for p in pods.values():
        q.add(p)
    attempt = q.take("backoff", "Coscheduling")
    assert attempt is not None and attempt.attempts == 1
    q.add_unschedulable(attempt)
    assert q.where("backoff") in ("backoff", "unschedulable")
    for name in ("active", "backoff", "mine"):
        qpi = q.take(name, "Coscheduling")
        assert qpi is not None and q.where(name) == "in-flight", name
        q.done(name)
    assert q.take("theirs", "Coscheduling") is None and q.where("theirs") == "gated"
    assert q.take("nobody", "Coscheduling") is None
    assert q.take("active", "Coscheduling") is None  # taken already: not in the queue


def test_activate_lets_a_gated_pod_through_once_its_plugins_do() -> None:
    held = {"g": "Coscheduling"}
    q = queue(held)
    q.add(pod("g", uid="g"))
    q.activate(["g"])
    assert q.where("g") == "gated"
    del held["g"]
    q.activate(["g"])
    assert q.where("g") == "active"
