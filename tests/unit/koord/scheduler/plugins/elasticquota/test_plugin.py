"""ElasticQuota in the whole scheduler (koord.scheduler.testing.MemoryScheduler): which quota a pod runs in,
admission refused over the runtime in Koordinator's words and allowed once the quota has room (a quota
that lends again, a node added), non-preemptible pods within min, parents, Reserve/Unreserve accounting,
and the requeueing events."""

from __future__ import annotations

from typing import Any

from koord.scheduler.framework import CycleState, Obj, Status
from koord.scheduler.plugins.elasticquota import NAME, ElasticQuota
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.extension import elasticquota as eq
from koordshared.testing import node, pod
from koordshared.testing.objects import elastic_quota

S = "koord-scheduler"
NO_VICTIMS = " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."


def kit(
    args: dict[str, Any] | None = None, *, extra: tuple[str, ...] = (), factories: Any = None
) -> MemoryScheduler:
    enabled = [{"name": NAME}, *({"name": n} for n in extra)]
    # Koordinator's profile: ElasticQuota's preemption first, then DefaultPreemption.
    post = {"disabled": [{"name": "*"}], "enabled": [{"name": NAME}, {"name": "DefaultPreemption"}]}
    plugins = {"multiPoint": {"enabled": enabled}, "postFilter": post}
    profile: dict[str, Any] = {"schedulerName": S, "plugins": plugins}
    if args is not None:
        profile["pluginConfig"] = [{"name": NAME, "args": args}]
    return MemoryScheduler({"profiles": [profile]}, plugins=factories)


def plugin(k: MemoryScheduler) -> ElasticQuota:
    found: ElasticQuota = k.scheduler.profiles[S].instances[NAME]
    return found


def qpod(
    name: str, quota: str = "", cpu: str = "1", *, namespace: str = "default", **kw: Any
) -> dict[str, Any]:
    labels = dict(kw.pop("labels", {}))
    if quota:
        labels[eq.LABEL_QUOTA_NAME] = quota
    return pod(name, namespace=namespace, requests={"cpu": cpu}, labels=labels, scheduler_name=S, **kw)


def put_quota(k: MemoryScheduler, obj: dict[str, Any]) -> None:
    k.informers["elasticquotas"].put(obj)


def failures(k: MemoryScheduler, key: str) -> list[str]:
    return [e[3] for e in k.events("FailedScheduling") if e[0] == key]


# ---- matching ------------------------------------------------------------------------------------


def test_a_pod_runs_in_the_quota_its_label_or_namespace_names() -> None:
    k = kit()
    put_quota(k, elastic_quota("team-a", namespace="quotas", maximum={"cpu": "4"}))
    put_quota(k, elastic_quota("ns1", namespace="ns1", maximum={"cpu": "4"}))  # named after its namespace
    put_quota(k, elastic_quota("named-elsewhere", namespace="ns2", maximum={"cpu": "4"}))
    listing = {eq.ANNOTATION_NAMESPACES: '["ns3", "ns4"]'}
    put_quota(k, elastic_quota("claims", namespace="quotas", maximum={"cpu": "4"}, annotations=listing))
    put_quota(k, elastic_quota("also-claims", namespace="quotas", maximum={"cpu": "4"}, annotations=listing))
    ledger = plugin(k).ledger
    assert ledger.quota_of(qpod("p", "team-a", namespace="ns1")) == "team-a"  # the label wins
    assert ledger.quota_of(qpod("p", "no-such-quota")) == eq.DEFAULT_QUOTA
    assert ledger.quota_of(qpod("p", namespace="ns1")) == "ns1"
    assert ledger.quota_of(qpod("p", namespace="ns2")) == eq.DEFAULT_QUOTA  # its quota is not named "ns2"
    assert ledger.quota_of(qpod("p", namespace="ns3")) == "also-claims"  # first by name
    assert ledger.quota_of(qpod("p", namespace="other")) == eq.DEFAULT_QUOTA


def test_pods_follow_a_quota_that_appears_after_them_and_return_when_it_goes() -> None:
    k = kit()
    k.add_pod(qpod("p", "late", cpu="2", node_name="n"))
    ledger = plugin(k).ledger
    assert ledger.usage(eq.DEFAULT_QUOTA).used == {"cpu": 2000}
    late = elastic_quota("late", maximum={"cpu": "4"})
    put_quota(k, late)
    assert ledger.usage("late").used == {"cpu": 2000} and ledger.usage(eq.DEFAULT_QUOTA).used == {"cpu": 0}
    k.informers["elasticquotas"].remove("default/late")
    assert ledger.usage(eq.DEFAULT_QUOTA).used == {"cpu": 2000}


# ---- admission -----------------------------------------------------------------------------------


def two_quotas(k: MemoryScheduler, *, b_lends: bool) -> None:
    """One 8-cpu node; quota a (min 2) asks for 4 cpu, quota b (min 6) asks for nothing."""
    k.add_node(node("n", "8", "32Gi"))
    put_quota(k, elastic_quota("a", minimum={"cpu": "2"}, maximum={"cpu": "8"}))
    put_quota(k, elastic_quota("b", minimum={"cpu": "6"}, maximum={"cpu": "8"}, lends=b_lends))
    for i in range(4):
        k.add_pod(qpod(f"a{i}", "a"))


def test_admission_is_refused_over_the_runtime_and_allowed_when_the_quota_grows() -> None:
    k = kit()
    two_quotas(k, b_lends=False)
    k.run()
    # b lends nothing: it keeps its 6, a gets 8 - 6 = 2 of the 4 it asks for.
    assert sorted(k.bound()) == ["default/a0", "default/a1"]
    assert plugin(k).ledger.runtime("a") == {"cpu": 2000}
    assert failures(k, "default/a2") == [
        "0/1 nodes are available: Insufficient quotas, quotaName: a, runtime: cpu:2, used: cpu:2, "
        "pod's request: cpu:1, exceedDimensions: [cpu]." + NO_VICTIMS
    ]
    # b lends again: a borrows the rest of its request, 4; the quota's change requeues its pods.
    put_quota(k, elastic_quota("b", minimum={"cpu": "6"}, maximum={"cpu": "8"}))
    assert plugin(k).ledger.runtime("a") == {"cpu": 4000}
    k.clock.advance(11)
    k.run()
    assert sorted(k.bound()) == ["default/a0", "default/a1", "default/a2", "default/a3"]


def test_a_node_added_grows_every_runtime() -> None:
    k = kit()
    two_quotas(k, b_lends=False)
    k.run()
    assert len(k.bound()) == 2
    k.add_node(node("m", "2", "8Gi"))  # 10 cpu: a gets 10 - 6 = 4
    k.clock.advance(11)
    k.run()
    assert len(k.bound()) == 4


def test_without_runtime_quotas_max_is_the_limit() -> None:
    k = kit({"enableRuntimeQuota": False})
    two_quotas(k, b_lends=False)
    k.run()
    assert len(k.bound()) == 4  # max 8 leaves a room for all 4


def test_non_preemptible_pods_stay_within_min() -> None:
    k = kit()
    k.add_node(node("n", "8", "32Gi"))
    put_quota(k, elastic_quota("a", minimum={"cpu": "2"}, maximum={"cpu": "8"}))
    fixed = {eq.LABEL_PREEMPTIBLE: "false"}
    for i in range(3):
        k.add_pod(qpod(f"np{i}", "a", labels=fixed))
    k.add_pod(qpod("free", "a"))
    k.run()
    assert sorted(k.bound()) == ["default/free", "default/np0", "default/np1"]
    assert failures(k, "default/np2") == [
        "0/1 nodes are available: Insufficient non-preemptible quotas, quotaName: a, min: cpu:2, "
        "nonPreemptibleUsed: cpu:2, pod's request: cpu:1, exceedDimensions: [cpu]." + NO_VICTIMS
    ]
    usage = plugin(k).ledger.usage("a")
    assert usage.non_preemptible_used == {"cpu": 2000} and usage.non_preemptible_request == {"cpu": 3000}


def test_requests_are_masked_to_the_quotas_max() -> None:
    k = kit()
    k.add_node(node("n", "8", "32Gi"))
    put_quota(k, elastic_quota("a", minimum={"cpu": "1"}, maximum={"cpu": "1"}))
    big_memory = pod(
        "m", requests={"cpu": "1", "memory": "30Gi"}, labels={eq.LABEL_QUOTA_NAME: "a"}, scheduler_name=S
    )
    k.add_pod(big_memory)
    k.run()
    assert k.bound() == {"default/m": "n"}  # the quota does not limit memory
    assert plugin(k).ledger.usage("a").used == {"cpu": 1000}


def test_a_parent_quota_takes_no_pods_and_parents_are_checked_when_asked() -> None:
    k = kit({"enableCheckParentQuota": True})
    k.add_node(node("n", "8", "32Gi"))
    put_quota(k, elastic_quota("p", minimum={"cpu": "3"}, maximum={"cpu": "3"}, is_parent=True))
    put_quota(k, elastic_quota("c1", maximum={"cpu": "8"}, parent="p"))
    put_quota(k, elastic_quota("c2", minimum={"cpu": "2"}, maximum={"cpu": "8"}, parent="p"))
    k.add_pod(qpod("in-parent", "p"))
    k.run()
    assert failures(k, "default/in-parent") == [
        "0/1 nodes are available: quota p is a parent quota "
        "(quota.scheduling.koordinator.sh/is-parent: true): pods run in leaf quotas only. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    ]
    # c1 holds 3 cpu placed by another scheduler; c2 asks for its min, 2. p asks for 3 + 2 capped at its
    # max 3: runtime 3; inside it c2 gets its 2, c1 the 1 left. c2's pod fits c2, not p (3 + 2 > 3).
    k.add_pod(pod("c1-0", requests={"cpu": "3"}, labels={eq.LABEL_QUOTA_NAME: "c1"}, node_name="n"))
    k.add_pod(qpod("c2-0", "c2", cpu="2"))
    k.run()
    assert plugin(k).ledger.runtime("c2") == {"cpu": 2000}
    assert k.bound() == {}
    assert failures(k, "default/c2-0") == [
        "0/1 nodes are available: Insufficient quotas, quotaNameTopo: [p c2], runtime: cpu:3, used: cpu:3, "
        "pod's request: cpu:2, exceedDimensions: [cpu]." + NO_VICTIMS
    ]
    k2 = kit()  # parents are not checked by default
    for obj in k.informers["elasticquotas"].objects():
        put_quota(k2, dict(obj))
    k2.add_node(node("n", "8", "32Gi"))
    k2.add_pod(pod("c1-0", requests={"cpu": "3"}, labels={eq.LABEL_QUOTA_NAME: "c1"}, node_name="n"))
    k2.add_pod(qpod("c2-0", "c2", cpu="2"))
    k2.run()
    assert k2.bound() == {"default/c2-0": "n"}


def test_the_default_quota_is_limited_by_its_max() -> None:
    k = kit({"defaultQuotaGroupMax": {"cpu": "1"}})
    k.add_node(node("n", "8", "32Gi"))
    k.add_pod(qpod("d0"))
    k.add_pod(qpod("d1"))
    k.run()
    assert list(k.bound()) == ["default/d0"]
    assert "quotaName: koordinator-default-quota, runtime: cpu:1" in failures(k, "default/d1")[0]


# ---- accounting ----------------------------------------------------------------------------------


class RejectAtPermit:
    name = "RejectAtPermit"

    def __init__(self, _args: Any, _handle: Any) -> None:
        pass

    def permit(self, state: CycleState, pod: Obj, node_name: str) -> tuple[Status | None, float]:
        return Status.unschedulable("no"), 0.0


def test_reserve_counts_the_pod_as_used_and_unreserve_gives_it_back() -> None:
    k = kit(extra=("RejectAtPermit",), factories={"RejectAtPermit": RejectAtPermit})
    k.add_node(node("n", "8", "32Gi"))
    put_quota(k, elastic_quota("a", minimum={"cpu": "2"}, maximum={"cpu": "8"}))
    k.add_pod(qpod("p", "a", cpu="2"))
    ledger = plugin(k).ledger
    assert ledger.usage("a").request == {"cpu": 2000} and ledger.usage("a").used == {}
    fw = k.scheduler.profiles[S]
    state = CycleState()
    target = k.pods.get("default/p")
    assert target is not None
    assert fw.run_reserve(state, target, "n") is None
    assert ledger.usage("a").used == {"cpu": 2000}
    fw.run_unreserve(state, target, "n")
    assert ledger.usage("a").used == {"cpu": 0}
    k.run()  # rejected at Permit: unreserved, still pending in its quota's request
    assert k.bound() == {}
    assert ledger.usage("a").used == {"cpu": 0} and ledger.usage("a").request == {"cpu": 2000}
    k.delete_pod("default", "p")
    assert ledger.usage("a").request == {"cpu": 0}


def test_pods_bound_elsewhere_count_as_used() -> None:
    k = kit()
    k.add_node(node("n", "8", "32Gi"))
    put_quota(k, elastic_quota("a", minimum={"cpu": "2"}, maximum={"cpu": "2"}))
    k.add_pod(pod("other", requests={"cpu": "2"}, labels={eq.LABEL_QUOTA_NAME: "a"}, node_name="n"))
    k.add_pod(qpod("mine", "a"))
    k.run()
    assert k.bound() == {}
    assert "used: cpu:2" in failures(k, "default/mine")[0]


# ---- requeueing ----------------------------------------------------------------------------------


def test_queue_hints_look_at_the_pods_quota() -> None:
    k = kit({"enableQueueHint": True})
    put_quota(k, elastic_quota("a", maximum={"cpu": "2"}))
    put_quota(k, elastic_quota("b", maximum={"cpu": "2"}))
    events = {str(e.event): e for e in plugin(k).events_to_register()}
    assert set(events) == {"Pod/DELETE", "ElasticQuota/ALL", "Node/ADD|UPDATE_NODE_ALLOCATABLE"}
    waiting = qpod("w", "a")
    deleted_hint = events["Pod/DELETE"].hint
    quota_hint = events["ElasticQuota/ALL"].hint
    assert deleted_hint is not None and quota_hint is not None
    assert deleted_hint(waiting, qpod("x", "a", node_name="n"), None).name == "QUEUE"
    assert deleted_hint(waiting, qpod("x", "b", node_name="n"), None).name == "SKIP"
    assert deleted_hint(waiting, qpod("x", "a"), None).name == "SKIP"  # it held nothing
    a, b = elastic_quota("a", maximum={"cpu": "4"}), elastic_quota("b", maximum={"cpu": "4"})
    a8, b8 = elastic_quota("a", maximum={"cpu": "8"}), elastic_quota("b", maximum={"cpu": "8"})
    assert quota_hint(waiting, a, a8).name == "QUEUE"
    assert quota_hint(waiting, b, b8).name == "SKIP"  # another quota
    assert quota_hint(waiting, None, a8).name == "QUEUE"  # a quota added
    # The scheduler's own figures written back are no reason to retry, hints or not.
    written = {**a, "metadata": {**a["metadata"], "annotations": {eq.ANNOTATION_RUNTIME: '{"cpu":"2"}'}}}
    written["status"] = {"used": {"cpu": "2"}}
    assert quota_hint(waiting, a, written).name == "SKIP"
    # Without enableQueueHint (Koordinator's default) every other change requeues.
    plain = {str(e.event): e.hint for e in kit().scheduler.profiles[S].instances[NAME].events_to_register()}
    assert plain["Pod/DELETE"] is None
    hint = plain["ElasticQuota/ALL"]
    assert hint is not None
    assert hint(waiting, b, b8).name == "QUEUE"
    assert hint(waiting, a, written).name == "SKIP"
