"""A node's restored room is kept from cycle to cycle: a cycle copies and writes only the nodes whose
reservations or pods changed since, and what it keeps is what a fresh restore would give after a new
owner, a reservation deleted, expired or made unschedulable, a node's pods changed, a pod that owns
none and an owner too big for a reservation between owners; a fit answer is kept only over the same
restored node, an owner match only for the same owners and pod labels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from koord.scheduler.framework.extension import ReservationHooks
from koord.scheduler.framework.reservation import ReservationInfo
from koord.scheduler.framework.snapshot import Snapshot
from koord.scheduler.framework.types import NodeInfo
from koord.scheduler.plugins.reservation import fit, plugin, transform
from koord.scheduler.plugins.reservation.cache import ReservationCache
from koord.scheduler.testing import MemoryScheduler
from koordshared.testing import pod
from koordshared.testing.reservations import available, owner_labels, reservation
from tests.support.counting import count_calls
from tests.support.scheduler.reservationkit import add, allocated_to, kit, owner

WEB = {"app": "web"}
DB = {"app": "db"}
NODES = {f"n{i}": "16" for i in range(6)}


def with_reservations(ttl: str | None = None) -> MemoryScheduler:
    k = kit(NODES)
    for i in range(6):
        r = reservation(f"r{i}", {"cpu": "2"}, owners=[owner_labels(WEB)], allocate_once=False, ttl=ttl)
        add(k, available(r, f"n{i}"))
    k.cache.update_snapshot(k.snapshot)
    return k


def one_owner_placed() -> MemoryScheduler:
    k = with_reservations()
    k.add_pod(owner("w0", "1", WEB))
    k.run()
    assert allocated_to(k, "w0")
    return k


def test_a_cycle_copies_and_writes_only_the_nodes_whose_reservations_or_pods_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    k = one_owner_placed()
    clones = count_calls(monkeypatch, NodeInfo, "clone")
    writes = count_calls(monkeypatch, Snapshot, "_write_row")
    fits = count_calls(monkeypatch, fit, "fits_one")
    owned = count_calls(monkeypatch, ReservationInfo, "match_owners")
    looks = count_calls(monkeypatch, ReservationCache, "on_node")
    states = count_calls(monkeypatch, plugin, "data_of")
    matches = count_calls(monkeypatch, transform, "_matches")
    nominations = count_calls(monkeypatch, ReservationHooks, "filter_nominate")
    node_states = count_calls(monkeypatch, transform, "NodeState")
    k.add_pod(owner("w1", "1", WEB))
    k.run()
    assert allocated_to(k, "w1")
    # w0's node: the cache's copy with w0 on it, and its restore (its reservation has a new owner). The
    # other five keep last cycle's restore: no copy, no row written (each was two before: back, again),
    # and the fit answers of last cycle's pod shape (each checked twice before: Filter, nomination).
    assert clones.n <= 2
    assert writes.n <= 3
    assert fits.n <= 2
    assert owned.n <= 1  # the owners of w0's reservation, as last cycle's pod labels: kept too
    assert looks.n == 0  # the reservations of every node read at once
    assert matches.n <= 1  # which reservations the pod may use: only on w0's node again
    assert nominations.n <= 1  # the reservation nominated on each node: only on w0's node again
    assert node_states.n <= 1  # what Filter and Score read of a node: kept with its restore
    # The cycle state read once per Filter and Score over the nodes, not once per node (nomination still
    # reads it per node: Reserve and PreBind, twice).
    assert states.n <= 3 * len(NODES) + 2


def test_a_second_owner_of_the_same_shape_looks_again_only_at_the_node_that_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    k = one_owner_placed()
    per_node = {
        "visited": (Snapshot, "underneath"),
        "restored": (transform.Restorer, "_restore"),
        "overlaid": (Snapshot, "overlay"),
        "filtered": (plugin.Reservation, "_filter"),
        "nominated": (plugin.Reservation, "_nominated"),
        "scored": (plugin, "_score"),
    }
    calls = {what: count_calls(monkeypatch, *where) for what, where in per_node.items()}
    k.add_pod(owner("w1", "1", WEB))
    k.run()
    assert allocated_to(k, "w1")
    # Only w0's node changed (its pods, its reservation's owners): the five others are not even visited,
    # and none is restored, overlaid, filtered, nominated or scored one by one (each was, once a node).
    counted = {what: c.n for what, c in calls.items()}
    assert counted == {what: min(n, 1) for what, n in counted.items()}
    assert counted["scored"] == 0  # Score reads the round's scores by row


def cycle(k: MemoryScheduler, name: str, fresh: bool, labels: dict[str, str], cpu: str) -> None:
    if fresh:  # the reference: every node restored and checked from scratch, as before anything was kept
        for fw in k.scheduler.profiles.values():
            fw.instances["Reservation"].restorer._kept.clear()
            fw.instances["Reservation"].restorer._owned.clear()
            fw.instances["Reservation"].restorer._seen.clear()
            fw.instances["Reservation"].restorer.rounds.clear()
            fw.instances["Reservation"]._answers.clear()
    k.add_pod(owner(name, cpu, labels))
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


def gathered(k: MemoryScheduler) -> dict[str, list[str]]:
    """Every node's reservations as the restore gets them, checked against a fresh look node by node."""
    cache = next(iter(k.scheduler.profiles.values())).instances["Reservation"].cache
    got = cache.by_node()
    assert got == {n: tuple(cache.on_node(n)) for n in cache.nodes()}
    return {n: [r.name for r in infos] for n, infos in got.items()}


def placed(k: MemoryScheduler) -> dict[str, tuple[str, str]]:
    return {key: (node, allocated_to(k, key.split("/")[1])) for key, node in k.bound().items()}


def test_what_is_kept_is_what_a_fresh_restore_gives_through_every_change() -> None:
    kept, fresh = with_reservations(ttl="10m"), with_reservations(ttl="10m")

    def expire(k: MemoryScheduler) -> None:
        k.clock.advance(601)
        k.reconcile()

    changes: list[Callable[[MemoryScheduler], object]] = [
        lambda k: None,  # a new owner each cycle
        lambda k: add(k, available(unschedulable("r3"), "n3")),  # no new owner: its node's pods the same
        lambda k: k.informers["reservations"].remove("r3"),  # deleted
        lambda k: add(
            k, available(reservation("r4", {"cpu": "2"}, owners=[owner_labels(DB)], ttl="10m"), "n4")
        ),
        lambda k: k.add_pod(pod("filler", node_name="n2", requests={"cpu": "12"})),  # the node's pods
        lambda k: k.delete_pod("default", "filler"),
        expire,  # every reservation expired
    ]
    n = 0
    for change in changes:
        for k in (kept, fresh):
            change(k)
        # An owner, a pod that owns none, an owner too big for a reservation, an owner of another.
        for labels, cpu in ((WEB, "1"), ({}, "1"), (WEB, "3"), (DB, "1")):
            cycle(kept, f"w{n}", False, labels, cpu)
            cycle(fresh, f"w{n}", True, labels, cpu)
            assert rows(kept) == rows(fresh), f"after w{n}"
            assert gathered(kept) == gathered(fresh), f"after w{n}"
            n += 1
    assert placed(kept) == placed(fresh)
    assert len(placed(kept)) == n
    assert len({r for _, r in placed(kept).values()} - {""}) >= 3  # owners spread over reservations
    assert all(r == "" for key, (_, r) in placed(kept).items() if int(key.split("/w")[1]) >= n - 4)


def unschedulable(name: str) -> dict[str, Any]:
    return reservation(
        name, {"cpu": "2"}, owners=[owner_labels(WEB)], allocate_once=False, ttl="10m", unschedulable=True
    )


def test_a_fit_answer_is_not_kept_over_a_node_whose_pods_changed() -> None:
    k = kit({"n0": "8"})
    r = reservation("r0", {"cpu": "2"}, owners=[owner_labels(WEB)], allocate_once=False, policy="Restricted")
    add(k, available(r, "n0"))
    k.add_pod(pod("filler", node_name="n0", requests={"cpu": "5"}))
    # Too big for r0, and beside r0 the node has 1 cpu (NodeResourcesFit, counting r0's room free, passes
    # it: only Reservation's Filter says no).
    k.add_pod(owner("big", "3", WEB))
    k.run()
    assert k.bound() == {}
    # The same reservation and pod shape, the node's pods changed: checked again, and it fits now.
    k.delete_pod("default", "filler")
    k.clock.advance(20)  # past its backoff
    k.run()
    assert k.bound() == {"default/big": "n0"}


def test_every_nodes_reservations_are_gathered_again_only_where_they_changed() -> None:
    k = with_reservations()
    cache = next(iter(k.scheduler.profiles.values())).instances["Reservation"].cache
    first = cache.by_node()
    k.add_pod(owner("w0", "1", WEB))
    k.run()
    second = cache.by_node()
    assert sum(1 for n in first if second[n] is first[n]) == 5  # all but w0's node: the same tuple
