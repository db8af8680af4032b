"""MigrationController's filters and its limits on evictions under way (dry runs: no API server here;
the Eviction API itself is exercised against the test API server in test_eviction_api)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from koord.descheduler.evictor import MigrationController
from koord.descheduler.framework import EvictionRefused, EvictOptions, Obj
from koord.descheduler.framework.runtime import Environment, ProfileEvictor, ProfileHandle
from koord.descheduler.informers import MemoryInformers
from koord.descheduler.testing import NoEvents
from koordshared.apis.meta.quantity import format_time
from koordshared.testing import FakeClock, objects

DRY = EvictOptions(plugin="test", reason="because", dry_run=True)


def controller(
    args: dict[str, Any] | None = None, pods: Sequence[Obj] = (), nodes: Sequence[Obj] = ()
) -> tuple[MigrationController, MemoryInformers, FakeClock]:
    clock = FakeClock()
    informers = MemoryInformers(nodes=nodes, pods=pods)
    env = Environment(client=None, informers=informers, recorder=NoEvents(), monotonic=clock, now=clock.wall)
    handle = ProfileHandle(env, ProfileEvictor(env, "p"))
    return MigrationController(args, handle), informers, clock


def owned(name: str, node: str = "n1", workload: str = "rs-1", **kw: Any) -> dict[str, Any]:
    p = objects.pod(name, node_name=node, phase="Running", **kw)
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": workload, "uid": workload, "controller": True}
    ]
    p["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return p


def with_(pod: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    *parents, last = path.split(".")
    target = pod
    for key in parents:
        target = target.setdefault(key, {})
    target[last] = value
    return pod


@pytest.mark.parametrize(
    ("pod", "reason"),
    [
        (objects.pod("bare", node_name="n1", phase="Running"), "ownerRefs"),
        (
            with_(owned("ds"), "metadata.ownerReferences", [{"kind": "DaemonSet", "name": "d", "uid": "d"}]),
            "DaemonSet",
        ),
        (with_(owned("mirror"), "metadata.annotations", {"kubernetes.io/config.mirror": "x"}), "mirror"),
        (with_(owned("static"), "metadata.annotations", {"kubernetes.io/config.source": "file"}), "static"),
        (with_(owned("going"), "metadata.deletionTimestamp", "2024-01-01T00:00:00Z"), "terminating"),
        (with_(owned("critical"), "spec.priority", 2_000_000_000), "system critical"),
        (with_(owned("local"), "spec.volumes", [{"name": "v", "emptyDir": {}}]), "local storage"),
        (
            with_(
                owned("forever"),
                "metadata.annotations",
                {"scheduling.koordinator.sh/eviction-cost": str(2**31 - 1)},
            ),
            "never evicted",
        ),
    ],
)
def test_pods_never_evicted_by_default(pod: dict[str, Any], reason: str) -> None:
    mc, _, _ = controller()
    assert not mc.filter(pod)
    assert any(reason in r for r in mc.static.reasons(pod))
    with pytest.raises(EvictionRefused) as err:
        mc.evict(pod, DRY)
    assert err.value.result == "filtered"


def test_options_widen_or_narrow_the_filter() -> None:
    bare_failed = objects.pod("bf", node_name="n1", phase="Failed")
    assert not controller()[0].filter(bare_failed)
    assert controller({"evictFailedBarePods": True})[0].filter(bare_failed)
    assert controller({"evictAllBarePods": True})[0].filter(objects.pod("b", node_name="n1", phase="Running"))
    local = with_(owned("local"), "spec.volumes", [{"name": "v", "hostPath": {}}])
    assert controller({"evictLocalStoragePods": True})[0].filter(local)
    pvc = with_(owned("pvc"), "spec.volumes", [{"name": "v", "persistentVolumeClaim": {}}])
    assert controller()[0].filter(pvc) and not controller({"ignorePvcPods": True})[0].filter(pvc)
    high = with_(owned("high"), "spec.priority", 1000)
    assert not controller({"priorityThreshold": {"value": 1000}})[0].filter(high)
    assert controller({"priorityThreshold": {"value": 1001}})[0].filter(high)
    labelled = owned("l", labels={"app": "web"})
    assert not controller({"labelSelector": {"matchLabels": {"app": "db"}}})[0].filter(labelled)
    assert not controller({"namespaces": {"exclude": ["default"]}})[0].filter(labelled)
    assert controller({"skipEvictionGates": ["Namespaces"], "namespaces": {"exclude": ["default"]}})[
        0
    ].filter(labelled)
    annotated = with_(
        objects.pod("bare-but-asked", node_name="n1"),
        "metadata.annotations",
        {"descheduler.alpha.kubernetes.io/evict": ""},
    )
    assert controller()[0].filter(annotated)


def test_node_fit_option_needs_another_node_that_takes_the_pod() -> None:
    pod = owned("p", requests={"cpu": "4"})
    small = objects.node("small", cpu="2")
    big = objects.node("big", cpu="8")
    assert not controller({"nodeFit": True}, pods=[pod], nodes=[objects.node("n1"), small])[0].filter(pod)
    assert controller({"nodeFit": True}, pods=[pod], nodes=[objects.node("n1"), big])[0].filter(pod)


def test_at_most_two_pods_migrate_per_node_by_default_even_when_deletions_are_instant() -> None:
    pods = [owned(f"p{i}", workload=f"w{i % 5}") for i in range(20)] + [
        owned(f"q{i}", workload=f"w{i % 5}", node="n2") for i in range(4)
    ]
    mc, _, _ = controller(pods=pods)
    mc.begin_round()
    evicted = []
    for p in pods:
        if mc.pre_eviction_filter(p):
            assert mc.evict(p, DRY)
            evicted.append(p["metadata"]["name"])
    assert [n for n in evicted if n.startswith("p")] == ["p0", "p1"]
    assert [n for n in evicted if n.startswith("q")] == ["q0", "q1"]
    # a dry run's decisions count for their round only
    mc.begin_round()
    assert mc.pre_eviction_filter(pods[2])


def test_real_evictions_hold_their_slot_until_the_pod_is_gone_and_the_round_over_or_the_ttl() -> None:
    pods = [owned(f"p{i}", workload=f"w{i}") for i in range(4)]
    # single-replica workloads would be refused: each gets a sibling elsewhere
    siblings = [owned(f"s{i}", workload=f"w{i}", node="n9") for i in range(4)]
    mc, informers, clock = controller(
        {"objectLimiters": {}, "skipCheckExpectedReplicas": True}, pods=pods + siblings
    )
    mc.begin_round()
    for p in pods[:2]:
        mc.limits.track(p, dry_run=False)  # as after a successful Eviction
    assert not mc.pre_eviction_filter(pods[2])
    informers.pods.remove("default/p0")  # deletion confirmed, but in the same round: still counted
    assert not mc.pre_eviction_filter(pods[2])
    mc.begin_round()  # next round: p0 is gone, p1 still terminating
    assert mc.pre_eviction_filter(pods[2])
    mc.limits.track(pods[2], dry_run=False)
    assert not mc.pre_eviction_filter(pods[3])
    clock.advance(300)  # defaultJobTTL: a pod stuck terminating frees its slot
    mc.begin_round()
    assert mc.pre_eviction_filter(pods[3])


def test_workload_limits() -> None:
    one = owned("alone", workload="solo")
    mc, _, _ = controller(pods=[one])
    assert mc.limits.refusal(one)[0] == "expected-replicas"
    three = [owned(f"w{i}", workload="trio") for i in range(3)]
    mc, _, _ = controller({"objectLimiters": {}}, pods=three)
    mc.begin_round()
    assert mc.limits.refusal(three[0]) == ("", "")
    mc.limits.track(three[0], dry_run=False)
    result, _ = mc.limits.refusal(three[1])
    assert result == "max-migrating-per-workload"  # 3 replicas: at most 1 migrating
    unready = [owned(f"u{i}", workload="flaky") for i in range(5)]
    unready[0]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    unready[1]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    mc, _, _ = controller({"objectLimiters": {}}, pods=unready)
    assert mc.limits.refusal(unready[2])[0] == "max-unavailable-per-workload"  # 5 replicas: 2 unavailable max


def test_workload_window_spaces_evictions_of_one_workload() -> None:
    pods = [owned(f"w{i}", workload="big") for i in range(20)]
    mc, informers, clock = controller(
        {"maxMigratingPerNode": 0, "objectLimiters": {"workload": {"duration": "60s"}}}, pods=pods
    )
    mc.begin_round()
    mc.limits.track(pods[0], dry_run=False)
    informers.pods.remove("default/w0")
    mc.begin_round()
    # 20 replicas: 2 per 60 s, burst 1: the next one in 30 s
    assert mc.limits.refusal(pods[1])[0] == "workload-window"
    clock.advance(30)
    assert mc.limits.refusal(pods[1]) == ("", "")


def test_global_and_namespace_limits() -> None:
    pods = [owned(f"p{i}", workload=f"w{i}", node=f"n{i}", namespace="a" if i < 3 else "b") for i in range(6)]
    pods += [owned(f"s{i}", workload=f"w{i}", node="spare") for i in range(6)]
    mc, _, _ = controller(
        {"objectLimiters": {}, "maxMigratingPerNamespace": 2, "maxMigratingGlobally": 3}, pods=pods
    )
    mc.begin_round()
    decided = [p["metadata"]["name"] for p in pods[:6] if mc.pre_eviction_filter(p) and mc.evict(p, DRY)]
    assert decided == ["p0", "p1", "p3"]


def test_a_fresh_evictor_counts_the_pods_the_cluster_shows_being_deleted() -> None:
    # A descheduler restarted while a ReplicaSet's pod is still terminating: nothing of that eviction is
    # in its memory, the pod's deletionTimestamp is in the cluster.
    rs = [owned(f"r{i}", workload="rs", node=f"n{i}") for i in range(5)]
    mc, informers, clock = controller({"objectLimiters": {}, "maxMigratingPerWorkload": 1}, pods=rs)
    terminating = with_(rs[0], "metadata.deletionTimestamp", format_time(clock.wall() + 30))
    informers.pods.put(terminating)  # its grace period ends in 30 s
    mc.begin_round()
    assert mc.limits.refusal(rs[1])[0] == "max-migrating-per-workload"
    informers.pods.remove("default/r0")  # the kubelet confirmed: the next round may evict one
    mc.begin_round()
    assert mc.limits.refusal(rs[1]) == ("", "")


def test_pods_being_deleted_count_per_node_and_globally_until_the_ttl() -> None:
    args = {"objectLimiters": {}, "skipCheckExpectedReplicas": True, "maxMigratingGlobally": 3}
    busy = [owned(f"b{i}", workload=f"wb{i}", node="busy") for i in range(4)]
    spare = [owned(f"s{i}", workload=f"ws{i}", node="spare") for i in range(2)]
    mc, informers, clock = controller(args, pods=busy + spare)
    for p in busy[:2]:
        informers.pods.put(with_(p, "metadata.deletionTimestamp", format_time(clock.wall() + 30)))
    mc.begin_round()
    assert mc.limits.refusal(busy[2])[0] == "max-migrating-per-node"  # default 2
    assert mc.limits.refusal(spare[0]) == ("", "")
    mc.limits.track(spare[0], dry_run=False)
    assert mc.limits.refusal(spare[1])[0] == "max-migrating-globally"  # 2 being deleted + 1 evicted
    # stuck terminating (a lost node): the slots are freed defaultJobTTL after the grace periods end
    clock.advance(30 + 300)
    mc.begin_round()
    assert mc.limits.refusal(busy[2]) == ("", "")
