"""Coscheduling as a QueueSort plugin (Koordinator's ``Coscheduling.Less``): priority, then
``koordinator.sh/priority``, then the gang group's time, the group id, the gang and the pod's name; a
profile with Coscheduling at queueSort runs."""

from __future__ import annotations

from typing import Any

import pytest

from koord.scheduler.framework.types import PodInfo
from koord.scheduler.queue.podinfo import QueuedPodInfo
from koordshared.apis.extension.qos import sub_priority
from koordshared.testing import node, pod
from tests.support.scheduler.gangkit import CO, S, kit, member, profile


def queued(p: dict[str, Any], at: float) -> QueuedPodInfo:
    return QueuedPodInfo(PodInfo(p), at)


def plugin() -> Any:
    k = kit()
    return k, k.scheduler.profiles[S].instances[CO]


@pytest.mark.parametrize(
    ("label", "value"),
    [("", 0), ("7", 7), ("-3", -3), ("0x10", 16), ("010", 8), ("0b11", 3), ("x", 0), ("2147483648", 0)],
)
def test_sub_priority_reads_the_label_as_go_parseint_base_zero(label: str, value: int) -> None:
    assert sub_priority({"koordinator.sh/priority": label} if label else {}) == value


def test_less_orders_priority_then_sub_priority_then_group_time_then_group_and_names() -> None:
    k, co = plugin()
    try:
        hi = queued(pod("hi", priority=10, scheduler_name=S), 5.0)
        lo = queued(pod("lo", priority=1, scheduler_name=S), 1.0)
        assert co.less(hi, lo) and not co.less(lo, hi)  # priority beats queue time
        sub_hi = queued(pod("s1", priority=1, labels={"koordinator.sh/priority": "9"}, scheduler_name=S), 9.0)
        assert co.less(sub_hi, lo) and not co.less(lo, sub_hi)  # then the sub-priority
        # Gangs: the group's time is the queue time of its first member compared; every member shares it.
        a1, a2, b1 = member("a1", "ga", 2), member("a2", "ga", 2), member("b1", "gb", 1)
        for p in (a1, a2, b1):
            k.add_pod(p)
        qa1, qb1, qa2 = queued(a1, 2.0), queued(b1, 3.0), queued(a2, 4.0)
        assert co.less(qa1, qb1)  # group ga stamped at 2.0, gb at 3.0
        assert co.less(qa2, qb1)  # a2 was queued after b1 but sorts with its gang
        assert co.less(qa1, qa2) and not co.less(qa2, qa1)  # same group and gang: by name
        plain = queued(pod("plain", scheduler_name=S), 2.5)
        assert co.less(qa2, plain) and co.less(plain, qb1)  # a pod outside gangs by its own queue time
    finally:
        k.stop()


def test_equal_times_fall_back_to_group_id_then_gang_key() -> None:
    k, co = plugin()
    try:
        x, y = member("x", "gx", 1), member("y", "gy", 1)
        k.add_pod(x)
        k.add_pod(y)
        qx, qy = queued(x, 1.0), queued(y, 1.0)
        assert co.less(qx, qy) and not co.less(qy, qx)  # "default/gx" < "default/gy"
    finally:
        k.stop()


def test_a_profile_with_coscheduling_at_queue_sort_runs_and_binds_the_gang() -> None:
    prof = profile()
    prof["plugins"]["queueSort"] = {"enabled": [{"name": CO}], "disabled": [{"name": "*"}]}
    from koord.scheduler.testing import MemoryScheduler

    k = MemoryScheduler({"profiles": [prof]})
    try:
        k.add_node(node("n0", "4", "8Gi"))
        k.add_pod(pod("solo", priority=0, requests={"cpu": "1"}, scheduler_name=S, uid="solo"))
        for i in range(3):
            k.add_pod(member(f"m{i}", "g", 3))
        k.run()
        assert k.bound() == {f"default/{n}": "n0" for n in ("solo", "m0", "m1", "m2")}
    finally:
        k.stop()


def test_multi_point_coscheduling_keeps_priority_sort_as_koordinator_v1_8() -> None:
    from koord.scheduler.testing import MemoryScheduler

    k = MemoryScheduler(
        {"profiles": [{"schedulerName": S, "plugins": {"multiPoint": {"enabled": [{"name": CO}]}}}]}
    )
    try:
        assert [e.name for e in k.scheduler.profiles[S].points["queueSort"]] == ["PrioritySort"]
    finally:
        k.stop()
