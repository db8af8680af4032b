"""CPU cost of the BE suppress decision: the fast-sample handler and the periodic reconcile, against the
metric-cache queries they cannot avoid (the floor).

The real metric cache holds 60 s of 1 s samples for the node, N pods and ``node_be``, plus 100 ms fast
samples. The host is the test fake and the executor answers "unchanged" to every update (the real one's
cache hit), so the figures are the plugin's own cost; nothing here is about the kernel (a write costs
~6 us). The handler is timed on its common path (no rise: two queries,
then return) and on a shrink (rise seen: budget, cpuset pick, 2N+1 updates handed to the executor).
Agent and floor alternate over several rounds; medians are printed. ``ratio`` = handler (no rise) / its
floor (the two fast-sample queries). Runs without root.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import threading
import time
from collections.abc import Callable, Sequence

from koordlet import api
from koordlet.metriccache.cache import MetricCache
from koordlet.testing import FakeClock, FakeExecutor, Harness, be_slo, make_harness, make_pod, topology
from qosplugins.cpusuppress import BECPUSuppress

NAME = "suppress_cost"


class UnchangedExecutor(FakeExecutor):
    """A ``ResourceWriter`` whose every cgroup value is already in place (the real executor's cache hit),
    so the figures are the plugin's own decision cost, not the writes'; the other write kinds are the
    fake's."""

    def update(self, update: api.CgroupUpdate) -> api.UpdateResult:
        return api.UpdateResult(update, written=False, skipped="unchanged")

    def update_batch(self, updates: Sequence[api.CgroupUpdate]) -> list[api.UpdateResult]:
        return [self.update(u) for u in updates]

    def leveled_update(self, levels: Sequence[Sequence[api.CgroupUpdate]]) -> list[api.UpdateResult]:
        return [self.update(u) for level in levels for u in level]

    def release(self, owner: str) -> None:
        return None


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def build(pods: int) -> tuple[Harness, BECPUSuppress, MetricCache, list[str]]:
    h = make_harness(1, topology(sockets=2, cores=8, threads=2), slo=be_slo())
    # A frozen clock keeps every sample inside its window however long the rounds take.
    clock = FakeClock(time.monotonic())
    cache = MetricCache(clock=clock)
    now = clock()
    uids = []
    for i in range(pods):
        qos = api.QOSClass.BE if i % 2 else api.QOSClass.LS
        pod = h.add_pod(make_pod(f"p{i}", qos))
        uids.append(pod.uid)
        for k in range(60):
            cache.append(api.POD_CPU_USAGE, {"pod_uid": pod.uid}, 0.05, now - 60 + k)
    for k in range(60):
        cache.append(api.NODE_CPU_USAGE, None, 0.05 * pods + 0.5, now - 60 + k)
        cache.append(api.NODE_BE, {"be_resource": "cpu", "be_allocation": "usage"}, 25.0 * pods, now - 60 + k)
    for k in range(100):
        cache.append(api.NODE_CPU_USAGE_FAST, None, 0.05 * pods + 0.5, now - 10 + k * 0.1)
        cache.append(api.BE_CPU_USAGE_FAST, None, 0.025 * pods, now - 10 + k * 0.1)
    plugin = BECPUSuppress()
    flags = api.FlagSet(plugin.name)
    plugin.init_flags(flags)
    h.options.update({f.name: f.default for f in flags})
    plugin.setup(dataclasses.replace(h.ctx, metrics=cache, clock=clock, executor=UnchangedExecutor(h.host)))
    plugin.run(threading.Event())
    plugin.reconcile()
    return h, plugin, cache, uids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pods", type=int, default=200)
    args = parser.parse_args()
    rounds = 5 if args.quick else 15
    calls = 300 if args.quick else 1000
    _, plugin, cache, uids = build(args.pods)

    def handler_floor() -> None:
        cache.query(api.NODE_CPU_USAGE_FAST, window=1.0, agg="last")
        cache.query(api.BE_CPU_USAGE_FAST, window=1.0, agg="last")

    def reconcile_floor() -> None:
        cache.query(api.NODE_CPU_USAGE, window=2.0, agg="last")
        for uid in uids:
            cache.query(api.POD_CPU_USAGE, window=2.0, agg="last", labels={"pod_uid": uid})

    settled = plugin._decision
    assert settled is not None, "no decision: the cache was not filled as expected"

    def redecide() -> None:
        # Pretend the last decision saw 5 cores less non-BE use: the sample is then a rise to act on.
        plugin._decision = dataclasses.replace(settled, non_be_milli=settled.non_be_milli - 5000)
        plugin.on_node_sample()

    handler, rise, h_floor, recon, r_floor = [], [], [], [], []
    for _ in range(rounds):
        plugin._decision = settled
        handler.append(per_call_us(plugin.on_node_sample, calls))
        h_floor.append(per_call_us(handler_floor, calls))
        rise.append(per_call_us(redecide, calls // 10))
        recon.append(per_call_us(plugin.reconcile, max(calls // 20, 5)))
        r_floor.append(per_call_us(reconcile_floor, max(calls // 20, 5)))
    handler_us, floor_us = statistics.median(handler), statistics.median(h_floor)
    result = {
        "bench": NAME,
        "pods": args.pods,
        "handler_no_rise_us": round(handler_us, 2),
        "handler_shrink_us": round(statistics.median(rise), 2),
        "handler_floor_us": round(floor_us, 2),
        "reconcile_ms": round(statistics.median(recon) / 1000, 3),
        "reconcile_floor_ms": round(statistics.median(r_floor) / 1000, 3),
        "reconcile_ratio": round(statistics.median(recon) / statistics.median(r_floor), 2),
        "ratio": round(handler_us / floor_us, 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
