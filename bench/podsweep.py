"""The pod sweep in process: its CPU per sweep beside its own reads (the floor), steady and under churn.

``PodResourceCollector`` over a FakeHost tree on tmpfs (``/dev/shm``; every pod one pod cgroup and one
container cgroup), cgroup v1 and v2, at 1000 and 100 pods: per sweep the thread's CPU of ``collect()``
over 60 sweeps steady and 60 with one pod replaced every 6 sweeps, and beside it the floor: the same
reader's ``fill()`` alone (the reads and the C parsing, nothing of the arithmetic or the metric cache).
``over_floor_ms`` is what the sweep pays beyond its reads; the difference of the churn and steady figures
times 6 is what one pod replaced costs. The thread's clock, not wall time: a busy machine slows it less.
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from pathlib import Path

from koordlet.metriccache import MetricCache
from koordlet.testing import FakeClock, FakeStates, container_id, make_pod, pod_uid
from tests.support.fakehost import FakeHost
from tests.support.podsweep import make, set_usage
from tests.support.recording import RecordingErrors

SHM = Path("/dev/shm")
CHURN_EVERY = 6


def sweep_ms(v2: bool, pods: int, churn_every: int, sweeps: int) -> tuple[float, float]:
    """CPU ms of one ``collect()`` and of one ``fill()`` of its reader, each averaged over ``sweeps``."""
    with tempfile.TemporaryDirectory(dir=SHM if SHM.is_dir() else None) as d:
        fh = FakeHost(Path(d))
        if v2:
            fh.use_cgroup_v2()
        fh.mkcgroup(None, "kubepods/besteffort")
        n = pods + sweeps
        made = [make_pod(f"pod-{i}", uid=pod_uid(i), container_ids=[container_id(i)]) for i in range(n)]
        for p in made:
            for cg in (fh.pod_cgroup(p.uid), fh.container_cgroup(p.uid, p.containers[0].container_id)):
                set_usage(fh, cg, cpu_ns=0)
        live, spare = made[:pods], made[pods:]
        clock = FakeClock()
        states = FakeStates(pods=list(live))
        cache = MetricCache(clock=clock, wall_clock=clock.wall)
        col = make(fh, cache, states, clock, RecordingErrors())
        for _ in range(5):
            col.collect()
            clock.advance(1.0)
        gc.collect()
        gc.disable()
        try:
            total = reads = 0.0
            for i in range(sweeps):
                if churn_every and i % churn_every == 0:
                    live = [*live[1:], spare.pop()]
                    states.pod_list = list(live)
                t0 = time.thread_time()
                col.collect()
                total += time.thread_time() - t0
                t0 = time.thread_time()
                assert col.read_sweep_files()
                reads += time.thread_time() - t0
                clock.advance(1.0)
        finally:
            gc.enable()
            col.close()
        return total / sweeps * 1e3, reads / sweeps * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20 sweeps each")
    ap.add_argument("--sweeps", type=int, default=60)
    args = ap.parse_args()
    sweeps = 20 if args.quick else args.sweeps
    rows = []
    print(f"{'cgroup':6} {'pods':>5} {'case':>7} {'sweep ms':>9} {'floor ms':>9} {'over floor':>10}")
    for v2 in (False, True):
        for pods in (1000, 100):
            for case, every in (("steady", 0), ("churn", CHURN_EVERY)):
                ms, floor = sweep_ms(v2, pods, every, sweeps)
                mode = "v2" if v2 else "v1"
                print(f"{mode:6} {pods:5d} {case:>7} {ms:9.3f} {floor:9.3f} {ms - floor:10.3f}")
                rows.append(
                    {
                        "cgroup": mode,
                        "pods": pods,
                        "case": case,
                        "sweep_ms": round(ms, 3),
                        "floor_ms": round(floor, 3),
                        "over_floor_ms": round(ms - floor, 3),
                    }
                )
    print(json.dumps({"bench": "podsweep", "sweeps": sweeps, "churn_every": CHURN_EVERY, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
