"""koord-scheduler's cycles end to end in memory (koord.scheduler.testing.MemoryScheduler): placement,
kube-scheduler's failure message and condition, Reserve/Permit/PreBind/Bind outcomes and their undoing,
a pod deleted while it waits, never two bindings, FrameworkExtender hooks, a broken pod not stopping the
queue."""

from __future__ import annotations

import time
from typing import Any

import pytest

from koord.scheduler.framework import SKIP, CycleState, NodeInfo, Obj, Status
from koord.scheduler.framework.types import PreFilterResult
from koord.scheduler.testing import MemoryScheduler
from koordshared.testing import node, pod

S = "koord-scheduler"


def kit(factories: dict[str, Any] | None = None, **profile: Any) -> MemoryScheduler:
    return MemoryScheduler({"profiles": [{"schedulerName": S, **profile}]}, plugins=factories)


def test_pods_are_placed_where_they_fit_and_only_once() -> None:
    k = kit()
    for name in ("a", "b"):
        k.add_node(node(name, "2", "4Gi"))
    for i in range(4):
        k.add_pod(pod(f"p{i}", requests={"cpu": "1"}, scheduler_name=S))
    k.add_pod(pod("other", requests={"cpu": "1"}, scheduler_name="default-scheduler"))
    k.run()
    bound = k.bound()
    assert sorted(bound) == ["default/p0", "default/p1", "default/p2", "default/p3"]  # not "other"
    assert sorted(bound.values()) == ["a", "a", "b", "b"]
    assert len(k.events("Scheduled")) == 4
    k.add_pod(pod("p4", requests={"cpu": "1"}, scheduler_name=S))
    k.run()
    assert "default/p4" not in k.bound()
    (event,) = k.events("FailedScheduling")
    # kube-scheduler's words, DefaultPreemption's verdict included.
    full = (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    assert event[3] == full
    ((condition, nominated),) = k.api.statuses["default/p4"]
    assert condition == {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": full,
    }
    assert nominated is None
    assert k.scheduler.queue.counts()["unschedulable"] == 1


def test_an_unschedulable_pod_is_retried_when_a_node_appears() -> None:
    k = kit()
    k.add_node(node("a", "1", "4Gi"))
    k.add_pod(pod("big", requests={"cpu": "2"}, scheduler_name=S))
    k.run()
    assert k.bound() == {}
    assert k.scheduler.queue.where(_uid(k, "big")) == "unschedulable"
    k.add_node(node("b", "4", "4Gi"))  # NodeResourcesFit registered Node/Add: requeued (after backoff)
    assert k.scheduler.queue.where(_uid(k, "big")) in ("backoff", "active")
    k.clock.advance(2)
    k.run()
    assert k.bound() == {"default/big": "b"}


def test_a_taint_change_that_does_not_help_does_not_requeue() -> None:
    k = kit()
    k.add_node(node("a", "4", "4Gi"))
    tainted = node("t", "4", "4Gi")
    tainted["spec"]["taints"] = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    k.nodes.put(tainted)
    k.add_pod(pod("p", requests={"cpu": "8"}, scheduler_name=S))
    k.run()
    uid = _uid(k, "p")
    assert k.scheduler.queue.where(uid) == "unschedulable"
    # a label change on a node: no plugin that rejected the pod (NodeResourcesFit) registered it
    relabelled = node("a", "4", "4Gi", labels={"x": "y"})
    k.nodes.put(relabelled)
    assert k.scheduler.queue.where(uid) == "unschedulable"


class Recorder:
    """Records every call; behaviour set per test."""

    def __init__(self, name: str, calls: list[str], **behaviour: Any) -> None:
        self.name = name
        self.calls = calls
        self.b = behaviour

    def reserve(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        self.calls.append(f"{self.name}.reserve {node_name}")
        return self.b.get("reserve")

    def unreserve(self, state: CycleState, pod: Obj, node_name: str) -> None:
        self.calls.append(f"{self.name}.unreserve {node_name}")

    def permit(self, state: CycleState, pod: Obj, node_name: str) -> tuple[Status | None, float]:
        self.calls.append(f"{self.name}.permit")
        return self.b.get("permit", (None, 0.0))

    def pre_bind(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        self.calls.append(f"{self.name}.pre_bind")
        patch = self.b.get("patch")
        if patch:
            self.b["handle"].patch_pod(state, patch)
        return self.b.get("pre_bind")

    def post_bind(self, state: CycleState, pod: Obj, node_name: str) -> None:
        self.calls.append(f"{self.name}.post_bind {node_name}")


def recorder_kit(
    calls: list[str], points: tuple[str, ...] = ("reserve", "permit", "preBind", "postBind"), **behaviour: Any
) -> MemoryScheduler:
    def factory(args: Any, handle: Any) -> Recorder:
        return Recorder("R", calls, handle=handle, **behaviour)

    plugins = {p: {"enabled": [{"name": "R"}]} for p in points}
    return kit({"R": factory}, plugins=plugins)


def test_reserve_failure_unreserves_forgets_and_requeues() -> None:
    calls: list[str] = []
    k = recorder_kit(calls, reserve=Status.unschedulable("no room in R"))
    k.add_node(node("a"))
    k.add_pod(pod("p", scheduler_name=S))
    k.run()
    assert calls == ["R.reserve a", "R.unreserve a"]
    assert k.bound() == {} and k.cache.counts() == (1, 0, 0)
    assert k.events("FailedScheduling")[0][3] == "no room in R"
    assert k.scheduler.queue.where(_uid(k, "p")) == "unschedulable"


def test_permit_wait_then_allow_binds_and_a_timeout_unreserves() -> None:
    calls: list[str] = []
    k = recorder_kit(calls, permit=(Status.wait("hold"), 30.0))
    k.add_node(node("a"))
    k.add_pod(pod("p", scheduler_name=S))
    k.run()
    uid = _uid(k, "p")
    assert k.bound() == {} and k.cache.is_assumed(uid)
    wp = k.handle.get_waiting_pod(uid)
    assert wp is not None and wp.pending_plugins() == ["R"] and wp.node_name == "a"
    wp.allow("R")
    k.settle()
    assert k.bound() == {"default/p": "a"}
    assert calls[-2:] == ["R.pre_bind", "R.post_bind a"]

    k.add_pod(pod("q", scheduler_name=S))
    k.run()
    quid = _uid(k, "q")
    assert k.handle.get_waiting_pod(quid) is not None
    k.clock.advance(31)
    k.waiting.expire_due()
    k.settle()
    assert "default/q" not in k.bound() and not k.cache.is_assumed(quid)
    assert calls[-1] == "R.unreserve a"
    # kube-scheduler's words, with the wait the plugin asked for (30 s)
    assert "rejected due to timeout after waiting 30s at plugin R" in k.events("FailedScheduling")[-1][3]


def test_a_permit_wait_is_capped_at_fifteen_minutes() -> None:
    calls: list[str] = []
    k = recorder_kit(calls, permit=(Status.wait("hold"), 3600.0))
    k.add_node(node("a"))
    k.add_pod(pod("p", scheduler_name=S))
    k.run()
    k.clock.advance(15 * 60 + 1)
    k.waiting.expire_due()
    # The waiting pods' timer thread may have taken the expiry first and not yet handed the rejection
    # to a binding thread when settle() looks: wait for the outcome itself.
    deadline = time.monotonic() + 10
    while calls[-1] != "R.unreserve a" and time.monotonic() < deadline:
        k.settle()
        time.sleep(0.01)
    assert k.bound() == {} and calls[-1] == "R.unreserve a"


def test_a_pod_deleted_while_waiting_is_unreserved_and_not_requeued() -> None:
    calls: list[str] = []
    k = recorder_kit(calls, permit=(Status.wait("hold"), 60.0))
    k.add_node(node("a"))
    k.add_pod(pod("p", scheduler_name=S))
    k.run()
    uid = _uid(k, "p")
    k.delete_pod("default", "p")
    k.settle()
    assert calls[-1] == "R.unreserve a"
    assert not k.cache.is_assumed(uid) and k.scheduler.queue.where(uid) is None
    assert k.bound() == {}


def test_prebind_patches_are_merged_into_one_patch_before_binding() -> None:
    calls: list[str] = []
    patch = {"metadata": {"annotations": {"example.com/where": "a"}}}
    k = recorder_kit(calls, patch=patch)
    k.add_node(node("a"))
    k.add_pod(pod("p", scheduler_name=S))
    k.run()
    assert k.api.patches["default/p"] == [patch]
    assert k.bound() == {"default/p": "a"}


def test_a_failing_bind_forgets_the_pod_and_retries_it_never_binding_twice() -> None:
    k = kit()
    k.add_node(node("a"))
    failures = iter(["connection reset"])
    k.api.fail_bind = lambda pod, node: next(failures, "")
    k.add_pod(pod("p", scheduler_name=S))
    k.run()
    uid = _uid(k, "p")
    assert k.bound() == {} and not k.cache.is_assumed(uid)
    assert k.scheduler.queue.where(uid) == "backoff"
    assert k.events("FailedScheduling")[0][3] == 'running Bind plugin "DefaultBinder": connection reset'
    k.clock.advance(1.5)
    k.run()
    assert k.bound() == {"default/p": "a"}
    # a duplicate add of the bound pod's pending version never schedules it again
    k.add_pod(pod("p", scheduler_name=S, uid=uid))
    k.run()
    assert len(k.api.bindings) == 1


def test_a_malformed_pod_does_not_stop_the_queue() -> None:
    k = kit()
    k.add_node(node("a"))
    bad = pod("bad", scheduler_name=S)
    bad["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": ["not", "a", "quantity"]}}}]
    bad["spec"]["tolerations"] = "everything"
    k.add_pod(bad)
    k.add_pod(pod("good", scheduler_name=S))
    k.run()
    assert k.bound().get("default/good") == "a"


class Transformer:
    name = "T"

    def __init__(self, args: Any, handle: Any) -> None:
        self.seen: list[str] = []
        handle.register_error_handler_filters(self.pre_error, None)
        handle.register_forget_pod_handler(lambda pod: self.seen.append("forgotten"))

    def before_pre_filter(self, state: CycleState, pod: Obj) -> tuple[Obj, bool, Status | None]:
        self.seen.append("before_pre_filter")
        if (pod.get("metadata") or {}).get("labels", {}).get("refuse") == "yes":
            return pod, False, Status.unschedulable("refused by T")
        return pod, False, None

    def after_pre_filter(self, state: CycleState, pod: Obj, result: PreFilterResult | None) -> Status | None:
        self.seen.append("after_pre_filter")
        return None

    def after_post_filter(self, state: CycleState, pod: Obj, statuses: Any) -> None:
        self.seen.append("after_post_filter")

    def pre_error(self, pod: Obj, why: Any) -> bool:
        self.seen.append(f"error {why.message}")
        return (pod.get("metadata") or {}).get("labels", {}).get("swallow") == "yes"

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        return None

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        return SKIP


def test_framework_extender_transformers_and_handlers() -> None:
    holder: dict[str, Transformer] = {}

    def factory(args: Any, handle: Any) -> Transformer:
        holder["t"] = Transformer(args, handle)
        return holder["t"]

    k = kit({"T": factory}, plugins={"multiPoint": {"enabled": [{"name": "T"}]}})
    k.add_node(node("a"))
    k.add_pod(pod("p", scheduler_name=S))
    k.run()
    t = holder["t"]
    assert t.seen[:2] == ["before_pre_filter", "after_pre_filter"] and k.bound() == {"default/p": "a"}
    t.seen.clear()
    k.add_pod(pod("r", scheduler_name=S, labels={"refuse": "yes"}))
    k.run()
    refused = (
        "0/1 nodes are available: refused by T. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )
    assert "after_post_filter" in t.seen and f"error {refused}" in t.seen
    assert k.events("FailedScheduling")[-1][3] == refused
    k.add_pod(pod("s", scheduler_name=S, labels={"refuse": "yes", "swallow": "yes"}))
    before = len(k.events("FailedScheduling"))
    k.run()
    assert len(k.events("FailedScheduling")) == before  # the pre-handler took the failure over
    assert k.scheduler.queue.where(_uid(k, "s")) is None


@pytest.mark.parametrize(
    ("nodes", "pct", "want"),
    [
        (50, 0, 50),
        (100, 0, 100),
        (1000, 0, 420),
        (5000, 0, 500),
        (5000, 100, 5000),
        (6000, 0, 300),
        (200, 10, 100),
    ],
)
def test_num_feasible_nodes_to_find_is_kube_schedulers(nodes: int, pct: int, want: int) -> None:
    from koord.scheduler.core.scheduler import num_feasible_nodes_to_find

    assert num_feasible_nodes_to_find(pct, nodes) == want


def _uid(k: MemoryScheduler, name: str) -> str:
    p = k.pods.get(f"default/{name}")
    assert p is not None
    return str(p["metadata"]["uid"])


def test_nodes_a_prefilter_result_leaves_out_are_named_by_plugin() -> None:
    k = kit()
    for name in ("a", "b", "c"):
        k.add_node(node(name, "1", "4Gi"))
    p = pod("pinned", requests={"cpu": "2"}, scheduler_name=S)
    names = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}
    p["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [names]}}
    }
    k.add_pod(p)
    k.run()
    assert k.bound() == {}
    # kube-scheduler's words for the nodes outside NodeAffinity's PreFilter result.
    assert k.events("FailedScheduling")[-1][3].startswith(
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
    )


def _samples(metric: Any, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in metric.collect()
        for s in family.samples
        if s.name == name
    }


def test_extension_points_and_plugins_are_timed_with_kube_schedulers_labels() -> None:
    k = kit()
    k.add_node(node("a", "2", "4Gi"))
    k.add_pod(pod("fits", requests={"cpu": "1"}, scheduler_name=S))
    k.add_pod(pod("too-big", requests={"cpu": "4"}, scheduler_name=S))
    k.run()
    points = _samples(k.metrics.point_duration, "scheduler_framework_extension_point_duration_seconds_count")
    seen = {(dict(labels)["extension_point"], dict(labels)["status"]) for labels in points}
    wanted = {("PreFilter", "Success"), ("Reserve", "Success"), ("Permit", "Success"), ("Bind", "Success")}
    assert wanted <= seen
    assert ("PostFilter", "Unschedulable") in seen  # DefaultPreemption found nothing for too-big
    assert all(dict(labels)["profile"] == S for labels in points)
    plugins = _samples(k.metrics.plugin_duration, "scheduler_plugin_execution_duration_seconds_count")
    named = {(dict(labels)["plugin"], dict(labels)["extension_point"]) for labels in plugins}
    assert ("NodeResourcesFit", "Filter") in named and ("DefaultBinder", "Bind") in named


def test_plugin_calls_are_timed_in_one_cycle_of_ten_as_kube_scheduler_samples_them() -> None:
    k = kit()
    k.add_node(node("a", "32", "64Gi"))
    for i in range(25):
        k.add_pod(pod(f"p{i}", requests={"cpu": "100m"}, scheduler_name=S))
    k.run()
    assert len(k.bound()) == 25
    points = _samples(k.metrics.point_duration, "scheduler_framework_extension_point_duration_seconds_count")
    plugins = _samples(k.metrics.plugin_duration, "scheduler_plugin_execution_duration_seconds_count")
    filters = {dict(labels)["extension_point"]: v for labels, v in points.items()}
    timed = {(dict(labels)["plugin"], dict(labels)["extension_point"]): v for labels, v in plugins.items()}
    assert filters["PreFilter"] == filters["Bind"] == 25  # every cycle's extension points
    assert timed[("NodeResourcesFit", "Filter")] == 3  # cycles 1, 11 and 21
    assert timed[("DefaultBinder", "Bind")] == 3


def test_unschedulable_pods_are_counted_by_rejecting_plugin() -> None:
    k = kit()
    k.add_node(node("a", "2", "4Gi"))
    k.add_pod(pod("too-big", requests={"cpu": "4"}, scheduler_name=S))
    k.run()
    (family,) = [m for m in k.registry.collect() if m.name == "scheduler_unschedulable_pods"]
    got = {(s.labels["plugin"], s.labels["profile"]): s.value for s in family.samples}
    assert got == {("NodeResourcesFit", S): 1.0}
    k.add_node(node("b", "8", "16Gi"))  # the pod fits there: it leaves the unschedulable pods
    k.run()
    (family,) = [m for m in k.registry.collect() if m.name == "scheduler_unschedulable_pods"]
    assert [s.value for s in family.samples] == []
