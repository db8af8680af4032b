"""Gangs (Coscheduling, Koordinator's annotation way) on scheduler_perf's node shape: ``nodes`` nodes of
``basic`` (4 cpu, 32Gi, 110 pods), ``gangs`` gangs of ``size`` pods (``min-available`` = ``size``, 100m
and 500Mi each), every ``unfit_every``-th gang with one member no node can take (8 cpu), so that gang is
tried and rejected (and retried as the room it held is given back), in Koordinator's shipped profile.

Measured in memory, each beside the same cluster and profile scheduling as many plain pods in the same run:

- **pods/s**: every gang created at once, from the first pod created to the last one bound;
- **gang latency**: gangs arriving one by one at ``rate`` gangs/s (below what the scheduler sustains), the
  time from a gang's last member created to all its members bound, p50 and p99.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from bench.workloads import basic
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.extension.coscheduling import GANG_MIN_AVAILABLE, GANG_NAME
from koordshared.kube.informer import EventHandler
from tests.support.scheduler.gangkit import profile

UNFIT_CPU = "8"


def cluster(nodes: int) -> MemoryScheduler:
    kit = MemoryScheduler({"profiles": [profile() | {"schedulerName": basic.SCHEDULER}]}, parallelism=16)
    for i in range(nodes):
        kit.add_node(basic.node(i))
    return kit


def member(gang: int, i: int, size: int, unfit: bool) -> dict[str, Any]:
    p = basic.pod(f"g{gang}-{i}")
    p["metadata"]["annotations"] = {GANG_NAME: f"g{gang}", GANG_MIN_AVAILABLE: str(size)}
    if unfit and i == size - 1:
        p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = UNFIT_CPU
    return p


class BindClock:
    """When each pod was seen bound (its binding back through the pod cache, as a watch event)."""

    def __init__(self, kit: MemoryScheduler) -> None:
        self.at: dict[str, float] = {}
        self._lock = threading.Lock()
        kit.pods.add_handler(EventHandler(on_update=self._updated))

    def _updated(self, old: Any, new: Any) -> None:
        if (new.get("spec") or {}).get("nodeName") and not (old.get("spec") or {}).get("nodeName"):
            with self._lock:
                self.at.setdefault(new["metadata"]["name"], time.perf_counter())

    def count(self, prefix: str = "") -> int:
        with self._lock:
            return sum(1 for name in self.at if name.startswith(prefix))


def _schedule_until(kit: MemoryScheduler, done: Callable[[], bool], limit: float) -> None:
    deadline = time.perf_counter() + limit
    while not done() and time.perf_counter() < deadline:
        kit.scheduler.schedule_next(timeout=0.01)
    kit.scheduler.drain()


def burst(nodes: int, gangs: int, size: int, unfit_every: int) -> dict[str, float]:
    """Pods/s with every gang created at once, and the plain pods/s of the same shape."""
    fit = [g for g in range(gangs) if (g + 1) % unfit_every]
    kit = cluster(nodes)
    clock = BindClock(kit)
    start = time.perf_counter()
    for g in range(gangs):
        for i in range(size):
            kit.add_pod(member(g, i, size, unfit=g not in fit))
    _schedule_until(kit, lambda: clock.count() >= len(fit) * size, 600)
    wall = max(clock.at.values(), default=start) - start
    bound = clock.count()
    kit.stop()
    plain_kit = cluster(nodes)
    plain = basic.schedule_all(plain_kit, lambda i: basic.pod(f"p-{i}"), gangs * size)
    plain_kit.stop()
    return {
        "gang_pods_per_s": round(bound / wall, 1) if wall > 0 else 0.0,
        "gang_bound": bound,
        "plain_pods_per_s": round(plain["bound"] / plain["wall"], 1),
    }


def arrivals(nodes: int, gangs: int, size: int, unfit_every: int, rate: float) -> list[float]:
    """Seconds from each fitting gang's last member created to all its members bound, gangs created one
    by one at ``rate`` gangs/s by another thread while this one schedules."""
    kit = cluster(nodes)
    clock = BindClock(kit)
    created: dict[int, float] = {}
    fit = [g for g in range(gangs) if (g + 1) % unfit_every]

    def create() -> None:
        t0 = time.perf_counter()
        for g in range(gangs):
            time.sleep(max(t0 + g / rate - time.perf_counter(), 0.0))
            for i in range(size):
                kit.add_pod(member(g, i, size, unfit=g not in fit))
            created[g] = time.perf_counter()

    creator = threading.Thread(target=create, name="gang-creator")
    creator.start()
    _schedule_until(kit, lambda: not creator.is_alive() and clock.count() >= len(fit) * size, 600)
    creator.join()
    kit.stop()
    out = []
    for g in fit:
        times = [clock.at.get(f"g{g}-{i}") for i in range(size)]
        if all(t is not None for t in times):
            out.append(max(t for t in times if t is not None) - created[g])
    return out
