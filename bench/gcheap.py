"""The garbage collector around koord-scheduler's caches: the caches filled and pods scheduled with
Python's default collector (the floor) and with ``koordshared.runtime.heap`` (held while the caches fill,
the synced heap frozen), each run in its own interpreter, in turns.

In process (``bench.workloads.basic``: 5000 nodes, 100 000 bound pods cached, then 3000 pods scheduled):
seconds to fill the caches; pods/s; cycle p50/p99/max; and the collector's passes during the 3000 cycles
(count, total ms, the longest, full passes), timed by ``gc.callbacks``. ``--quick``: 20 000 cached pods.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from typing import Any

from bench.workloads import basic
from koordshared.runtime import heap

MODES = ("default", "heap")


def one(mode: str, placed: int, pods: int) -> dict[str, Any]:
    """One run in this interpreter."""
    if mode == "heap":
        heap.hold()
    t0 = time.perf_counter()
    kit = basic.cluster(5000, placed, parallelism=16)
    fill = time.perf_counter() - t0
    if mode == "heap":
        heap.settle(collect=False)
    passes: list[tuple[float, int]] = []
    started = [0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            passes.append(((time.perf_counter() - started[0]) * 1000, int(info["generation"])))

    gc.callbacks.append(timed)
    try:
        run = basic.schedule_all(kit, lambda i: basic.pod(f"p-{i}"), pods)
    finally:
        gc.callbacks.remove(timed)
        kit.stop()
    assert run["bound"] == pods, run["bound"]
    cycles = sorted(c * 1000 for c in run["cycles"])
    return {
        "mode": mode,
        "fill_s": round(fill, 2),
        "pods_per_s": round(pods / run["wall"]),
        "cycle_p50_ms": round(cycles[len(cycles) // 2], 2),
        "cycle_p99_ms": round(cycles[int(len(cycles) * 0.99)], 2),
        "cycle_max_ms": round(cycles[-1], 1),
        "gc_passes": len(passes),
        "gc_ms": round(sum(ms for ms, _ in passes), 1),
        "gc_longest_ms": round(max((ms for ms, _ in passes), default=0.0), 1),
        "gc_full": sum(1 for _, g in passes if g == 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20 000 cached pods, one run each")
    ap.add_argument("--runs", type=int, default=2, help="runs of each mode, in turns")
    ap.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--placed", type=int, default=100_000, help=argparse.SUPPRESS)
    args = ap.parse_args()
    pods = 3000
    if args.one:
        print(json.dumps(one(args.one, args.placed, pods)))
        return 0
    placed, runs = (20_000, 1) if args.quick else (args.placed, args.runs)
    print(f"5000 nodes, {placed} cached pods, {pods} scheduled; default = the floor")
    head = "mode      fill s  pods/s  p50 ms  p99 ms  max ms  gc passes  gc ms  longest ms  full"
    print(head)
    rows = []
    for _ in range(runs):
        for mode in MODES:
            argv = [sys.executable, "-m", "bench.gcheap", "--one", mode, "--placed", str(placed)]
            out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            rows.append(r)
            print(
                f"{mode:8} {r['fill_s']:7.2f} {r['pods_per_s']:7d} {r['cycle_p50_ms']:7.2f} "
                f"{r['cycle_p99_ms']:7.2f} {r['cycle_max_ms']:7.1f} {r['gc_passes']:10d} {r['gc_ms']:6.1f} "
                f"{r['gc_longest_ms']:11.1f} {r['gc_full']:5d}",
                flush=True,
            )
    print(json.dumps({"bench": "gcheap", "placed": placed, "pods": pods, "runs": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
