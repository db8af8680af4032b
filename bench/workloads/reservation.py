"""Reservations (Koordinator's Reservation plugin, at the points and weight of its shipped profile) on
scheduler_perf's node shape (``basic``: 4 cpu, 32Gi, 110 pods), measured in memory, each beside the same
cluster and profile in the same run:

- **owners**: ``count`` Available reservations (1 cpu, 2Gi each, allocate-once, for the pods labelled
  ``app: web``) spread over the nodes, then ``count`` owners (100m, 500Mi) scheduled: pods/s, per-cycle
  p50/p99, and how many landed in a reservation (every one should);
- **reserve pods**: ``count`` pending reservations scheduled as their reserve pods (their Bind writes the
  reservation's status) : reservations/s;
- **others**: ``count`` plain pods on the same cluster before the owners come (every reservation is
  looked at, none is theirs);
- **plain**: ``count`` plain pods on the same nodes and profile without any reservation (the floor).
"""

from __future__ import annotations

import time
from typing import Any

from bench.workloads import basic
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.scheduling import reservation as rsv
from koordshared.testing.reservations import available, owner_labels, reservation
from tests.support.scheduler.reservationkit import profile

WEB = {"app": "web"}


def cluster(nodes: int) -> MemoryScheduler:
    """The nodes, in the snapshot's rows in node order before any reservation is (as in a scheduler that
    has been running: a reservation placed later does not move its node's row)."""
    kit = MemoryScheduler({"profiles": [profile() | {"schedulerName": basic.SCHEDULER}]}, parallelism=16)
    for i in range(nodes):
        kit.add_node(basic.node(i))
    kit.cache.update_snapshot(kit.snapshot)
    return kit


def _reservation(i: int, now: float) -> dict[str, Any]:
    return reservation(
        f"r-{i}",
        {"cpu": "1", "memory": "2Gi"},
        owners=[owner_labels(WEB)],
        scheduler_name=basic.SCHEDULER,
        created=now,
    )


def _owner(i: int) -> dict[str, Any]:
    p = basic.pod(f"web-{i}")
    p["metadata"]["labels"] = dict(WEB)
    return p


def _stats(run: dict[str, Any]) -> dict[str, float]:
    cycles = sorted(run["cycles"])
    p = (lambda q: round(1000 * cycles[min(int(q * len(cycles)), len(cycles) - 1)], 2)) if cycles else None
    return {
        "pods_per_s": round(run["bound"] / run["wall"], 1) if run["wall"] else 0.0,
        "p50_ms": p(0.5) if p else 0.0,
        "p99_ms": p(0.99) if p else 0.0,
    }


def algorithm(nodes: int, count: int) -> dict[str, Any]:
    stride = max(nodes // count, 1)
    # Available reservations: other pods beside them, then their owners.
    kit = cluster(nodes)
    now = kit.clock.wall()
    for i in range(count):
        kit.informers["reservations"].put(available(_reservation(i, now), f"node-{(i * stride) % nodes:05d}"))
    others = _stats(basic.schedule_all(kit, lambda i: basic.pod(f"other-{i}"), count))
    owners = _stats(basic.schedule_all(kit, _owner, count))
    placed = sum(
        1 for i in range(count) if rsv.allocated_of(kit.pods.get(f"sched-perf/web-{i}") or {}) is not None
    )
    kit.stop()
    # Pending reservations, scheduled as their reserve pods.
    kit = cluster(nodes)
    now = kit.clock.wall()
    start = time.perf_counter()
    for i in range(count):
        kit.informers["reservations"].put(_reservation(i, now))
    while kit.scheduler.schedule_next(timeout=0):
        pass
    kit.scheduler.drain()
    wall = time.perf_counter() - start
    done = sum(1 for r in kit.informers["reservations"].objects() if rsv.is_available(r))
    kit.stop()
    kit = cluster(nodes)
    plain = _stats(basic.schedule_all(kit, lambda i: basic.pod(f"p-{i}"), count))
    kit.stop()
    res = {
        "reservation_owner_pods_per_s": owners["pods_per_s"],
        "reservation_owner_p50_ms": owners["p50_ms"],
        "reservation_owner_p99_ms": owners["p99_ms"],
        "reservation_owners_placed_in_one": placed,
        "reservation_others_pods_per_s": others["pods_per_s"],
        "reservation_reserve_pods_per_s": round(done / wall, 1) if wall else 0.0,
        "reservation_plain_pods_per_s": plain["pods_per_s"],
        "reservation_plain_p50_ms": plain["p50_ms"],
    }
    print(
        f"reservations, {nodes} nodes, {count} reservations: owners {owners['pods_per_s']} pods/s "
        f"(cycle p50 {owners['p50_ms']} ms p99 {owners['p99_ms']} ms, {placed}/{count} in a reservation), "
        f"others beside them {others['pods_per_s']} pods/s, "
        f"reserve pods {res['reservation_reserve_pods_per_s']}/s ({done} placed); "
        f"plain pods without reservations {plain['pods_per_s']} pods/s "
        f"(p50 {plain['p50_ms']} ms)",
        flush=True,
    )
    return res
