"""An owner's cycle starts from the last cycle of its pod shape (its round; what it costs is counted in
``test_kept_restore.py``): a node whose reservations changed since is looked at again, and owners in waves
are placed and told what a fresh look places and tells them."""

from __future__ import annotations

import pytest

from koord.scheduler.framework.snapshot import Snapshot
from koord.scheduler.plugins.reservation import plugin, transform
from koord.scheduler.plugins.reservation.cache import ReservationCache
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.scheduling import reservation as rsv
from koordshared.testing import pod
from koordshared.testing.reservations import available, owner_labels, reservation
from tests.support.counting import count_calls
from tests.support.scheduler.reservationkit import add, allocated_to, kit, owner

WEB = {"app": "web"}
NODES = {f"n{i:02d}": "8" for i in range(40)}


def reserved(count: int = len(NODES)) -> MemoryScheduler:
    k = kit(NODES)
    for i, name in enumerate(list(NODES)[:count]):
        r = reservation(f"r{i}", {"cpu": "2"}, owners=[owner_labels(WEB)], allocate_once=False)
        add(k, available(r, name))
    k.cache.update_snapshot(k.snapshot)
    return k


def test_a_round_is_not_taken_over_a_change_of_the_reservations() -> None:
    """A reservation that goes between two owners of the same shape: its node is looked at again."""
    k = reserved(2)
    k.add_pod(owner("w0", "1", WEB))
    k.run()
    other = "n01" if k.bound()["default/w0"] == "n00" else "n00"
    gone = "r1" if other == "n01" else "r0"
    k.informers["reservations"].remove(gone)
    k.add_pod(owner("w1", "1", WEB))
    k.run()
    assert allocated_to(k, "w1") == allocated_to(k, "w0") != gone


def failed(k: MemoryScheduler, name: str) -> list[str]:
    return [e[3] for e in k.events("FailedScheduling") if e[0] == f"default/{name}"]


def test_what_an_owner_no_node_takes_is_told_is_what_a_fresh_look_gives() -> None:
    k = reserved(6)
    for name in ("big0", "big1"):  # the second of the same shape: from the first's round
        k.add_pod(owner(name, "9", WEB))
        k.run()
    fresh = reserved(6)
    fresh.add_pod(owner("big1", "9", WEB))
    fresh.run()
    assert k.bound() == {} and fresh.bound() == {}
    assert failed(k, "big1") == failed(fresh, "big1") == failed(k, "big0")
    assert "6 Reservation(s) matched owner total" in failed(k, "big1")[0]


def test_the_reservation_cache_tells_which_nodes_changed_since_a_generation() -> None:
    k = reserved(4)
    cache = next(iter(k.scheduler.profiles.values())).instances["Reservation"].cache
    assert isinstance(cache, ReservationCache)
    view, generation, _ = cache.by_node_since(-1)
    k.informers["reservations"].remove("r2")
    again, later, changed = cache.by_node_since(generation)
    assert changed == {"n02"}
    assert later > generation
    assert list(again) == ["n00", "n01", "n03"]
    assert list(view) == ["n00", "n01", "n02", "n03"]  # an answer given stays as it was
    assert cache.by_node_since(later)[2] == set()


def test_a_reservation_that_moves_leaves_no_node_behind() -> None:
    cache = ReservationCache()
    r = reservation("r", {"cpu": "2"}, owners=[owner_labels(WEB)])
    cache.reservation_changed(available(r, "n00"))
    cache.reservation_changed(available(r, "n01"))
    assert cache.nodes() == ["n01"]
    assert list(cache.by_node()) == ["n01"]
    assert [i.node_name for i in cache.on_node("n01")] == ["n01"] and cache.on_node("n00") == []


def _forget_everything(k: MemoryScheduler) -> None:
    for fw in k.scheduler.profiles.values():
        r = fw.instances["Reservation"]
        for kept in (r.restorer._kept, r.restorer._owned, r.restorer._seen, r._answers):
            kept.clear()
        r.restorer.rounds.clear()


def _mixed() -> MemoryScheduler:
    order = rsv.LABEL_RESERVATION_ORDER
    k = kit({f"m{i}": str(4 + i % 3 * 2) for i in range(8)})
    for i in range(12):
        r = reservation(
            f"r{i}",
            {"cpu": str(1 + i % 3)},
            owners=[owner_labels(WEB)],
            allocate_once=i % 4 == 0,
            policy="Restricted" if i % 3 == 1 else None,
            labels={order: str(1 + i % 5)} if i % 2 else None,
        )
        add(k, available(r, f"m{i % 8}"))
    k.cache.update_snapshot(k.snapshot)
    return k


def test_owners_in_waves_are_placed_and_told_as_a_fresh_look_places_and_tells_them() -> None:
    kept, fresh = _mixed(), _mixed()
    changes = [
        lambda k: None,
        lambda k: k.informers["reservations"].remove("r3"),
        lambda k: k.add_pod(pod("filler", node_name="m5", requests={"cpu": "5"})),
        lambda k: k.delete_pod("default", "filler"),
    ]
    n = 0
    for change in changes:
        for k in (kept, fresh):
            change(k)
        for labels, cpu in ((WEB, "1"), (WEB, "1"), (WEB, "2"), ({}, "1"), (WEB, "2"), (WEB, "7")):
            for k, forget in ((kept, False), (fresh, True)):
                if forget:
                    _forget_everything(k)
                k.add_pod(owner(f"w{n}", cpu, labels))
                k.run()
            assert allocated_to(kept, f"w{n}") == allocated_to(fresh, f"w{n}"), f"w{n}"
            assert failed(kept, f"w{n}") == failed(fresh, f"w{n}"), f"w{n}"
            n += 1
    assert kept.bound() == fresh.bound()
    assert len({allocated_to(kept, f"w{i}") for i in range(n)} - {""}) >= 4
    assert any(failed(kept, f"w{i}") for i in range(n))


def test_an_owner_after_another_shape_overlays_its_copies_again_and_looks_no_further(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    k = reserved(6)
    k.add_pod(owner("w0", "1", WEB))
    k.run()
    held = allocated_to(k, "w0")
    # A pod of another shape no node takes: its own copy of w0's node overlaid for its cycle, and the
    # owners' copies of the five others put back (all six rows written).
    k.add_pod(owner("other", "100", {}))
    k.run()
    assert "default/other" not in k.bound()
    work = {
        "restored": (transform.Restorer, "_restore"),
        "filtered": (plugin.Reservation, "_filter"),
        "nominated": (plugin.Reservation, "_nominated"),
    }
    calls = {what: count_calls(monkeypatch, *where) for what, where in work.items()}
    overlays = count_calls(monkeypatch, Snapshot, "overlay")
    k.add_pod(owner("w1", "1", WEB))
    k.run()
    assert allocated_to(k, "w1") == held  # the fullest reservation
    # Under five of the rows nothing changed: the owners' copies are overlaid there again, nothing is
    # worked out again but on w0's node (its pods, its reservation's owners).
    assert {what: c.n for what, c in calls.items()} == dict.fromkeys(work, 1)
    assert overlays.n == 6
