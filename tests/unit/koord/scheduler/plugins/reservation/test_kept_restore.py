"""A node's restored room is kept from cycle to cycle: a cycle copies and writes only the nodes whose
reservations or pods changed since, and what it keeps is what a fresh restore would give after a new
owner, a reservation deleted, expired or made unschedulable, a node's pods changed, and a pod that owns
none between owners."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from koord.scheduler.framework.snapshot import Snapshot
from koord.scheduler.framework.types import NodeInfo
from koord.scheduler.testing import MemoryScheduler
from koordshared.testing import pod
from koordshared.testing.reservations import available, owner_labels, reservation
from tests.support.counting import count_calls
from tests.support.scheduler.reservationkit import add, allocated_to, kit, owner

WEB = {"app": "web"}
NODES = {f"n{i}": "16" for i in range(6)}


def with_reservations(ttl: str | None = None) -> MemoryScheduler:
    k = kit(NODES)
    for i in range(6):
        r = reservation(f"r{i}", {"cpu": "2"}, owners=[owner_labels(WEB)], allocate_once=False, ttl=ttl)
        add(k, available(r, f"n{i}"))
    k.cache.update_snapshot(k.snapshot)
    return k


def test_a_cycle_copies_and_writes_only_the_nodes_whose_reservations_or_pods_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    k = with_reservations()
    k.add_pod(owner("w0", "1", WEB))
    k.run()
    assert allocated_to(k, "w0")
    clones = count_calls(monkeypatch, NodeInfo, "clone")
    writes = count_calls(monkeypatch, Snapshot, "_write_row")
    k.add_pod(owner("w1", "1", WEB))
    k.run()
    assert allocated_to(k, "w1")
    # w0's node: the cache's copy with w0 on it, and its restore (its reservation has a new owner). The
    # other five keep last cycle's restore: no copy, no row written (each was two before: back, again).
    assert clones.n <= 2
    assert writes.n <= 3


def cycle(k: MemoryScheduler, name: str, fresh: bool, labels: dict[str, str]) -> None:
    if fresh:  # the reference: every node restored from scratch, as before anything was kept
        for fw in k.scheduler.profiles.values():
            fw.instances["Reservation"].restorer._kept.clear()
    k.add_pod(owner(name, "1", labels))
    k.run()


def rows(k: MemoryScheduler) -> dict[str, Any]:
    snap = k.snapshot
    out: dict[str, Any] = {}
    for ni in snap.node_infos():
        i = snap.index[ni.name]
        out[ni.name] = (
            dict(ni.requested),
            ni.non_zero_cpu,
            ni.non_zero_memory,
            len(ni.pods),  # reserve pods are named by the random uid
            snap.requested[i].tolist(),
            snap.non_zero[i].tolist(),
        )
    return out


def placed(k: MemoryScheduler) -> dict[str, tuple[str, str]]:
    return {key: (node, allocated_to(k, key.split("/")[1])) for key, node in k.bound().items()}


def test_what_is_kept_is_what_a_fresh_restore_gives_through_every_change() -> None:
    kept, fresh = with_reservations(ttl="10m"), with_reservations(ttl="10m")
    changes: list[Callable[[MemoryScheduler], None]] = [
        lambda k: None,  # a new owner each cycle
        lambda k: k.informers["reservations"].remove("r1"),  # deleted
        lambda k: add(k, available(unschedulable("r3"), "n3")),  # no new owner: its node's pods the same
        lambda k: k.add_pod(pod("filler", node_name="n2", requests={"cpu": "3"})),  # the node's pods
        lambda k: k.delete_pod("default", "filler"),
        lambda k: (k.clock.advance(601), k.reconcile()),  # every reservation expired
    ]
    n = 0
    for change in changes:
        for k in (kept, fresh):
            change(k)
        for labels in (WEB, {}, WEB):  # an owner, a pod that owns none, an owner
            cycle(kept, f"w{n}", False, labels)
            cycle(fresh, f"w{n}", True, labels)
            assert rows(kept) == rows(fresh), f"after w{n}"
            n += 1
    assert placed(kept) == placed(fresh)
    assert len(placed(kept)) == n
    assert len({r for _, r in placed(kept).values()} - {""}) >= 3  # owners spread over reservations
    assert all(r == "" for key, (_, r) in placed(kept).items() if int(key.split("/w")[1]) >= n - 3)


def unschedulable(name: str) -> dict[str, Any]:
    return reservation(
        name, {"cpu": "2"}, owners=[owner_labels(WEB)], allocate_once=False, ttl="10m", unschedulable=True
    )
