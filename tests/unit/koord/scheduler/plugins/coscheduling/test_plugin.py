"""Coscheduling end to end in memory (MemoryScheduler, Koordinator's shipped profile): a gang binds all
or nothing, in one Permit release; what every member is told when it is not placed; Strict and NonStrict
timeouts; gang groups; a member failing, deleted, or held by another plugin; once-satisfied gangs."""

from __future__ import annotations

import pytest

from koord.scheduler.plugins.coscheduling.reporter import GANG_TIMEOUT
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.extension.coscheduling import BIND_GANG_GROUP_ID, BIND_GANG_MEMBER_COUNT
from koordshared.testing import node, pod
from tests.support.scheduler.gangkit import S, condition, eventually, kit, member, messages, uid

ROOM_FOR_4 = "gang default/g: rejected with 4 of 5 members waiting at Permit"
NO_ROOM = "0/4 nodes are available: 4 Insufficient cpu."


def test_a_gang_of_five_with_room_for_four_binds_none_and_every_member_says_why() -> None:
    k = kit(nodes=4)
    for i in range(5):
        k.add_pod(member(f"g{i}", "g", 5))
    k.add_pod(pod("loner", requests={"cpu": "100m"}, scheduler_name=S))
    k.run()
    assert list(k.bound()) == ["default/loner"]  # none of the gang; the queue goes on after it
    for i in range(5):
        (msg,) = messages(k, f"g{i}")
        assert "gang default/g" in msg and "4 of 5 members waiting at Permit" in msg, msg
        assert "Insufficient cpu" in msg, msg
        cond = eventually(lambda i=i: condition(k, f"g{i}"))
        assert cond == {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg}
    failed = [i for i in range(5) if messages(k, f"g{i}")[0].startswith("0/4 nodes are available")]
    assert len(failed) == 1  # the member no node took says so in kube-scheduler's words, then the gang's
    (f,) = failed
    # Koordinator's profile disables "*" at postFilter, so its plugins run as listed there (kube-scheduler
    # expands no multiPoint plugin into such a point): Coscheduling before DefaultPreemption.
    assert messages(k, f"g{f}") == [
        f"0/4 nodes are available: 4 Insufficient cpu. {ROOM_FOR_4} (Strict), preemption: 0/4 nodes are "
        "available: 4 No preemption victims found for incoming pod."
    ]
    for i in set(range(5)) - {f}:
        assert messages(k, f"g{i}") == [f"{ROOM_FOR_4}: member default/g{f} cannot be placed: {NO_ROOM}"]
    counts = k.scheduler.queue.counts()  # the member that did not fit retries after a backoff: the room
    assert counts["unschedulable"] + counts["backoff"] == 5  # its gang held was given back meanwhile
    assert len(k.waiting) == 0 and not any(k.cache.is_assumed(uid(f"g{i}")) for i in range(5))


@pytest.mark.parametrize(
    "room", ["a node added", "a pod that is no member deleted", "a bound member of a finished gang deleted"]
)
def test_room_for_the_fifth_binds_all_five_in_one_permit_release(room: str) -> None:
    k = kit(nodes=4)
    if room == "a pod that is no member deleted":
        k.add_node(node("n4", "1", "8Gi"))
        k.add_pod(pod("blocker", requests={"cpu": "1"}, node_name="n4"))
    elif room == "a bound member of a finished gang deleted":
        k.add_node(node("n4", "1", "8Gi"))
        k.add_pod(member("blocker", "done", 1))
        k.run()
        assert list(k.bound()) == ["default/blocker"]
    before = k.bound()
    for i in range(5):
        k.add_pod(member(f"g{i}", "g", 5))
    k.run()
    assert k.bound() == before
    # The fifth failed Filter (in backoff); the gang's own Unreserve (four assumed members forgotten, each
    # an assigned pod's deletion) woke none of the four it rejected.
    assert k.scheduler.queue.counts()["unschedulable"] == 4
    # The member no node took is requeued by NodeResourcesFit's event, the four the gang rejected at Permit
    # by Coscheduling's: when every member's last rejection is the gang's (a member's Unreserve rejects
    # whoever of a later round already waits), room appearing must still wake them.
    if room == "a node added":
        k.add_node(node("n4", "1", "8Gi"))
    else:
        k.delete_pod("default", "blocker")
    assert k.scheduler.queue.counts()["unschedulable"] == 0
    k.clock.advance(30)  # the backoff
    k.run()
    gang = {key: n for key, n in k.bound().items() if key not in before}
    assert sorted(gang) == [f"default/g{i}" for i in range(5)]
    assert sorted(gang.values()) == [f"n{i}" for i in range(5)]
    # Bound together: every member was allowed in the release that counted all five of them waiting.
    for i in range(5):
        (patch,) = k.api.patches[f"default/g{i}"]
        annotations = patch["metadata"]["annotations"]
        assert annotations[BIND_GANG_GROUP_ID] == "default/g"
        assert annotations[BIND_GANG_MEMBER_COUNT] == "5"
    assert len(k.events("Scheduled")) == len(k.bound())


def test_members_wait_at_permit_until_the_last_one_and_nothing_binds_before() -> None:
    k = kit(nodes=3)
    for i in range(3):
        k.add_pod(member(f"g{i}", "g", 3, gates=["later"] if i == 2 else None))
    k.run()
    assert k.bound() == {} and len(k.waiting) == 2  # the third is held by its scheduling gate
    third = member("g2", "g", 3)
    k.add_pod(third)  # the gate lifted
    k.run()
    assert sorted(k.bound()) == ["default/g0", "default/g1", "default/g2"]
    assert len(k.waiting) == 0


def _timeout_case(mode: str) -> tuple[MemoryScheduler, list[str]]:
    """A gang of 3 (waiting-time 10s) whose third member is held by a scheduling gate: g0 waits at Permit
    from t=0, g1 (its gate lifted at t=5) from t=5; at t=10 g0's wait is over."""
    k = kit(nodes=3)
    k.add_pod(member("g0", "g", 3, mode=mode, waiting="10s"))
    for name in ("g1", "g2"):
        k.add_pod(member(name, "g", 3, mode=mode, waiting="10s", gates=["later"]))
    k.run()
    assert len(k.waiting) == 1 and k.cache.is_assumed(uid("g0"))
    k.clock.advance(5)
    k.add_pod(member("g1", "g", 3, mode=mode, waiting="10s"))
    k.run()
    assert len(k.waiting) == 2 and k.bound() == {}
    k.clock.advance(5)
    k.waiting.expire_due()
    k.settle()
    k.run()
    return k, [name for name in ("g0", "g1") if k.cache.is_assumed(uid(name))]


def test_strict_timeout_returns_every_waiting_member_to_the_queue() -> None:
    k, assumed = _timeout_case("Strict")
    assert assumed == [] and len(k.waiting) == 0
    assert k.scheduler.queue.where(uid("g0")) == "unschedulable"
    assert k.scheduler.queue.where(uid("g1")) == "unschedulable"
    (gang,) = messages(k, "g0", GANG_TIMEOUT)  # the gang's word (at Unreserve), then the framework's
    (timeout,) = messages(k, "g0")
    assert timeout == (
        "rejected due to timeout after waiting 10s at plugin Coscheduling: gang default/g needs 3 members "
        "waiting at Permit (min-available), waiting-time 10s"
    )
    why = "member default/g0 waited 10s (the gang's waiting time) for the others"
    assert gang == f"gang default/g: rejected with 1 of 3 members waiting at Permit: {why}"
    assert messages(k, "g1") == [gang]


def test_nonstrict_timeout_keeps_the_other_assumed_members_waiting() -> None:
    k, assumed = _timeout_case("NonStrict")
    assert assumed == ["g1"] and len(k.waiting) == 1
    assert k.scheduler.queue.where(uid("g0")) == "unschedulable"
    why = "member default/g0 waited 10s (the gang's waiting time) for the others"
    assert messages(k, "g0", GANG_TIMEOUT) == [
        f"gang default/g: {why}; 1 of 3 members waiting at Permit keep waiting (NonStrict)"
    ]
    assert messages(k, "g1") == messages(k, "g1", GANG_TIMEOUT) == []
    k.clock.advance(5)  # g1's own waiting time ends
    k.waiting.expire_due()
    k.settle()
    assert len(k.waiting) == 0 and not k.cache.is_assumed(uid("g1"))


GROUP = ["default/a", "default/b"]


def test_a_gang_group_binds_only_when_both_gangs_are_valid() -> None:
    k = kit(nodes=4)
    for name in ("a0", "a1"):
        k.add_pod(member(name, "a", 2, groups=GROUP))
    k.add_pod(member("b0", "b", 2, groups=GROUP))
    k.run()
    assert k.bound() == {} and len(k.waiting) == 0  # b has one pod of two: the whole group is held
    assert k.scheduler.queue.where(uid("a0")) == "gated"
    k.add_pod(member("b1", "b", 2, groups=GROUP))
    k.run()
    assert sorted(k.bound()) == ["default/a0", "default/a1", "default/b0", "default/b1"]
    for name in ("a0", "a1", "b0", "b1"):
        annotations = k.api.patches[f"default/{name}"][0]["metadata"]["annotations"]
        assert annotations[BIND_GANG_GROUP_ID] == "default/a,default/b"
        assert annotations[BIND_GANG_MEMBER_COUNT] == "4"


def test_a_gang_group_with_room_for_one_gang_binds_neither() -> None:
    k = kit(nodes=3)
    for name in ("a0", "a1"):
        k.add_pod(member(name, "a", 2, groups=GROUP))
    for name in ("b0", "b1"):
        k.add_pod(member(name, "b", 2, groups=GROUP))
    k.run()
    assert k.bound() == {} and len(k.waiting) == 0
    rejected = [m for name in ("a0", "a1", "b0", "b1") for m in messages(k, name) if "rejected with" in m]
    assert len(rejected) == 4
    assert all(
        "gang group [default/a default/b]: rejected with members waiting at Permit: default/a " in m
        for m in rejected
    ), rejected


def test_a_member_deleted_while_its_gang_waits_rejects_the_others_in_strict_mode() -> None:
    k = kit(nodes=3)
    k.add_pod(member("g0", "g", 3))
    k.add_pod(member("g1", "g", 3))
    k.add_pod(member("g2", "g", 3, gates=["later"]))
    k.run()
    assert len(k.waiting) == 2
    k.delete_pod("default", "g0")
    k.settle()
    assert len(k.waiting) == 0 and not k.cache.is_assumed(uid("g1"))
    assert messages(k, "g1") == [
        "gang default/g: rejected with 1 of 3 members waiting at Permit: "
        "member default/g0 left Permit without being bound"
    ]
    assert k.scheduler.queue.where(uid("g0")) is None  # deleted: gone from the queue


def test_once_satisfied_a_later_member_is_placed_on_its_own() -> None:
    k = kit(nodes=4)
    for i in range(2):
        k.add_pod(member(f"g{i}", "g", 2, annotations={"gang.scheduling.koordinator.sh/total-number": "3"}))
    k.run()
    assert sorted(k.bound()) == ["default/g0", "default/g1"]
    k.add_pod(member("g2", "g", 2, annotations={"gang.scheduling.koordinator.sh/total-number": "3"}))
    k.run()
    assert "default/g2" in k.bound()
    assert k.api.patches.get("default/g2") is None  # bound alone: no gang annotations


def test_only_waiting_does_not_count_bound_members_and_waiting_and_running_does() -> None:
    for policy, binds in (("only-waiting", False), ("waiting-and-running", True)):
        k = kit(nodes=4)
        extra = {"gang.scheduling.koordinator.sh/match-policy": policy}
        k.add_pod(
            member("g0", "g", 2, annotations=extra)
            | {"spec": {**member("g0", "g", 2)["spec"], "nodeName": "n0"}}
        )
        k.add_pod(member("g1", "g", 2, annotations=extra))
        k.run()
        assert ("default/g1" in k.bound()) is binds, policy


def test_a_malformed_min_available_holds_the_gang_with_a_clear_reason_and_the_queue_goes_on() -> None:
    k = kit(nodes=2)
    k.add_pod(member("bad0", "bad", "two"))
    k.add_pod(member("bad1", "bad", None))  # each new pod may define the gang: the last one tried says why
    k.add_pod(pod("other", requests={"cpu": "1"}, scheduler_name=S))
    k.run()
    assert list(k.bound()) == ["default/other"]
    why = (
        "gang default/bad: pod default/bad1: annotation gang.scheduling.koordinator.sh/min-available is "
        "missing: the gang's size is unknown"
    )
    assert k.scheduler.queue.where(uid("bad0")) == "gated"
    assert messages(k, "bad0") == []  # a pod of a job being created is not reported at once
    k.clock.advance(3)
    k.run()
    for name in ("bad0", "bad1"):
        assert messages(k, name) == [why]
        assert condition(k, name) == {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": why,
        }
    k.clock.advance(60)
    k.run()
    assert messages(k, "bad0") == [why]  # told once while nothing changes


def test_an_incomplete_gang_is_reported_on_each_member_and_binds_when_complete() -> None:
    k = kit(nodes=5)
    for i in range(3):
        k.add_pod(member(f"g{i}", "g", 5))
    k.run()
    k.clock.advance(3)
    k.run()
    why = "gang default/g: only 3 pods exist, min-available is 5 (0 of 5 members waiting at Permit)"
    assert [messages(k, f"g{i}") for i in range(3)] == [[why]] * 3
    k.add_pod(member("g3", "g", 5))
    k.clock.advance(3)
    k.run()
    assert messages(k, "g0") == [why]  # refreshed at most every 30 s
    k.clock.advance(30)
    k.run()
    assert messages(k, "g0") == [why, why.replace("only 3", "only 4")]
    assert messages(k, "g3") == [why.replace("only 3", "only 4")]
    k.add_pod(member("g4", "g", 5))
    k.run()
    assert len(k.bound()) == 5


def test_annotations_that_fall_back_are_told_on_each_member_and_the_gang_still_works() -> None:
    k = kit(nodes=2)
    bad = {
        "gang.scheduling.koordinator.sh/mode": "Lenient",
        "gang.scheduling.koordinator.sh/total-number": "1",
        "gang.scheduling.koordinator.sh/match-policy": "sometimes",
        "gang.scheduling.koordinator.sh/waiting-time": "soon",
        "gang.scheduling.koordinator.sh/groups": "[default/g",
    }
    for i in range(2):
        k.add_pod(member(f"g{i}", "g", 2, annotations=bad))
    k.run()
    assert len(k.bound()) == 2
    (told,) = messages(k, "g0", "InvalidGangSpec")
    a = "annotation gang.scheduling.koordinator.sh"
    assert told.split("; ") == [
        f"gang default/g: {a}/total-number 1 is below min-available 2: using 2",
        f'{a}/mode "Lenient" is neither Strict nor NonStrict: using Strict',
        f'{a}/match-policy "sometimes" is not one of only-waiting, waiting-and-running, once-satisfied: '
        "using once-satisfied",
        f'{a}/waiting-time "soon" is not a duration (e.g. 300s, 10m): using the default 10m0s',
        f'{a}/groups "[default/g" is not a JSON list of "namespace/name": the gang is alone',
    ]
    assert messages(k, "g1", "InvalidGangSpec") == [told]


def test_a_waiting_time_above_the_permit_limit_is_reported_and_held_at_fifteen_minutes() -> None:
    k = kit(nodes=2)
    k.add_pod(member("g0", "g", 2, waiting="30m"))
    k.add_pod(member("g1", "g", 2, waiting="30m", gates=["later"]))
    k.run()
    (told,) = messages(k, "g0", "InvalidGangSpec")
    assert told == (
        "gang default/g: annotation gang.scheduling.koordinator.sh/waiting-time 30m0s exceeds the 15m0s a "
        "pod may wait at Permit: members wait at most 15m0s"
    )
    k.clock.advance(15 * 60 - 1)
    k.waiting.expire_due()
    assert len(k.waiting) == 1
    k.clock.advance(2)
    k.waiting.expire_due()
    k.settle()
    assert len(k.waiting) == 0
    assert "waiting-time 15m0s" in messages(k, "g0")[-1]


def test_nonstrict_members_wait_while_the_rest_are_tried_then_go_back_with_the_failure() -> None:
    k = kit(nodes=3)
    for i in range(4):
        k.add_pod(member(f"g{i}", "g", 4, mode="NonStrict"))
    k.run()
    assert k.bound() == {} and len(k.waiting) == 0
    msgs = {i: messages(k, f"g{i}")[0] for i in range(4)}
    (f,) = [i for i, m in msgs.items() if m.startswith("0/3 nodes")]
    assert msgs[f].startswith(
        "0/3 nodes are available: 3 Insufficient cpu. gang default/g: 3 of 4 members waiting at Permit keep "
        "waiting until every pending member was tried (NonStrict), preemption: "
    )
    for i in set(msgs) - {f}:
        assert msgs[i] == (
            f"gang default/g: rejected with 3 of 4 members waiting at Permit: member default/g{f} cannot be "
            "placed: 0/3 nodes are available: 3 Insufficient cpu."
        )


def test_a_member_bound_on_its_own_loses_stale_gang_annotations() -> None:
    k = kit(nodes=3)
    for i in range(2):
        k.add_pod(member(f"g{i}", "g", 2, annotations={"gang.scheduling.koordinator.sh/total-number": "3"}))
    k.run()
    stale = {BIND_GANG_GROUP_ID: "default/old", BIND_GANG_MEMBER_COUNT: "7"}
    k.add_pod(member("g2", "g", 2, annotations={"gang.scheduling.koordinator.sh/total-number": "3", **stale}))
    k.run()
    assert "default/g2" in k.bound()
    (patch,) = k.api.patches["default/g2"]
    assert patch == {"metadata": {"annotations": {BIND_GANG_GROUP_ID: None, BIND_GANG_MEMBER_COUNT: None}}}
