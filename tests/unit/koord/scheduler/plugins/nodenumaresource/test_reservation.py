"""NodeNUMAResource beside the Reservation plugin (Koordinator's shipped profile has both): a reservation
of an LSR template is placed on whole cores, written on the Reservation as ``resource-status``; its owner
takes its CPUs from those cores, another pod never does, and a scheduler that starts with the reservation
already Available counts its CPUs from the annotation."""

from __future__ import annotations

from typing import Any

from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.extension.numa import ANNOTATION_RESOURCE_STATUS, resource_status
from koordshared.testing import FakeClock
from koordshared.testing.reservations import available, owner_labels, reservation
from tests.support.scheduler.numakit import NUMA, add_node, lsr, placement
from tests.support.scheduler.reservationkit import add, allocated_to, get, phase, profile

WEB = {"app": "web"}
LSR = {"koordinator.sh/qosClass": "LSR", "koordinator.sh/priority-class": "koord-prod"}


def kit() -> MemoryScheduler:
    k = MemoryScheduler({"profiles": [profile(extra=(NUMA,))]}, clock=FakeClock())
    add_node(k, "a")
    return k


def lsr_reservation(name: str, cpu: str, **kw: Any) -> dict[str, Any]:
    r = reservation(name, {"cpu": cpu, "memory": "1Gi"}, owners=[owner_labels(WEB)], **kw)
    r["spec"]["template"]["metadata"]["labels"] = dict(LSR)
    container = r["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"] = dict(container["resources"]["requests"])
    return r


def owner(name: str, cpu: str) -> dict[str, Any]:
    pod = lsr(name, cpu)
    pod["metadata"]["labels"].update(WEB)
    return pod


def reserved_cpus(k: MemoryScheduler, name: str) -> frozenset[int]:
    return resource_status(get(k, name)["metadata"]["annotations"]).cpus


def test_a_reservation_holds_whole_cores_for_its_owner_and_no_one_else() -> None:
    k = kit()
    add(k, lsr_reservation("r1", "4"))
    k.run()
    assert phase(k, "r1") == "Available"
    held = reserved_cpus(k, "r1")
    assert held == frozenset({0, 1, 8, 9})  # NUMA node 0, both cores: written on the Reservation
    k.add_pod(lsr("other", "4"))  # not an owner: the node's other CPUs
    k.add_pod(owner("web", "2"))
    k.run()
    assert allocated_to(k, "web") == "r1"
    assert placement(k, "web").cpus <= held and len(placement(k, "web").cpus) == 2
    assert placement(k, "other").cpus == frozenset({4, 5, 12, 13})  # the emptier socket's NUMA node


def test_cpus_of_an_available_reservation_are_counted_from_its_annotation() -> None:
    k = kit()
    r = available(lsr_reservation("r1", "4"), "a")
    r["metadata"]["annotations"][ANNOTATION_RESOURCE_STATUS] = '{"cpuset":"0-1,8-9"}'
    add(k, r)
    for i in range(3):  # 12 CPUs left beside the reservation's 4: three pods of 4, no more
        k.add_pod(lsr(f"p{i}", "4"))
    k.add_pod(lsr("p3", "4"))
    k.run()
    bound = {n for n in ("p0", "p1", "p2", "p3") if f"default/{n}" in k.bound()}
    assert len(bound) == 3
    taken = frozenset().union(*(placement(k, n).cpus for n in bound))
    assert taken == frozenset(range(16)) - {0, 1, 8, 9}
    # the reservation ends: its CPUs are free for the pod left over
    done = get(k, "r1")
    add(k, {**done, "status": {**done["status"], "phase": "Succeeded"}})
    k.clock.advance(30)
    k.run()
    assert placement(k, ({"p0", "p1", "p2", "p3"} - bound).pop()).cpus == frozenset({0, 1, 8, 9})
