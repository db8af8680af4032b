"""Run a console entry point with cProfile in every thread (``python -m cProfile`` sees the main thread
only, and koord-scheduler schedules and binds on threads of its own); the threads' stats are merged into
one file when the process exits. The timer is each thread's own CPU time (``time.thread_time``): a thread
waiting on a socket, a lock or its queue costs nothing, so the figures say where the CPU goes (at about
three times the run time: a deterministic profiler's cost grows with the number of calls).

    python -m bench.workloads.profiled OUT.prof koord.scheduler.cli:entry -- --config ...

Read it with ``pstats`` (``bench/against_kube.py --profile`` prints the top of it).
"""

from __future__ import annotations

import atexit
import cProfile
import importlib
import pstats
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def print_top(path: Path, pods: int, top: int = 25) -> None:
    """The functions koord-scheduler spent the most time in (every thread, the whole run, startup
    included), per pod placed: own time, then with callees (cumulative) of the scheduling entry points."""
    import pstats

    if not path.exists():
        print(f"  (no profile at {path})")
        return
    st = pstats.Stats(str(path))
    rows = st.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in rows.values())

    def name(k: tuple[str, int, str]) -> str:
        file, line, fn = k
        short = file.split("/site-packages/")[-1].replace(str(ROOT) + "/", "")
        return f"{short}:{line}({fn})"

    print(f"  profile {path.name}: {total:.1f} s own time over all threads, {pods} pods")
    print(f"  {'ms/pod own':>10} {'ms/pod cum':>10} {'calls/pod':>9}  function")
    for k, v in sorted(rows.items(), key=lambda kv: -kv[1][2])[:top]:
        print(f"  {v[2] * 1000 / pods:>10.3f} {v[3] * 1000 / pods:>10.3f} {v[1] / pods:>9.1f}  {name(k)}")
    wanted = ("schedule_one", "_binding_cycle", "run_filter_plugins", "run_score_plugins", "update_snapshot")
    for k, v in sorted(rows.items(), key=lambda kv: -kv[1][3]):
        if k[2] in wanted and "koord/" in k[0]:
            print(f"  cum {v[3] * 1000 / pods:8.3f} ms/pod  {name(k)}")


def main() -> None:
    out, target, *rest = sys.argv[1:]
    args = rest[1:] if rest[:1] == ["--"] else rest
    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start_profiling(*_: object) -> None:
        # The first event in a new thread: replace this hook by a profiler of the thread's own.
        p = cProfile.Profile(time.thread_time)
        with lock:
            profiles.append(p)
        p.enable()

    def dump() -> None:
        with lock:
            taken = list(profiles)
        stats: pstats.Stats | None = None
        for p in taken:
            p.create_stats()
            if not p.stats:
                continue
            stats = pstats.Stats(p) if stats is None else stats.add(p)
        if stats is not None:
            stats.dump_stats(out)

    atexit.register(dump)
    threading.setprofile(start_profiling)
    start_profiling()
    module, _, func = target.partition(":")
    sys.argv = [module, *args]
    getattr(importlib.import_module(module), func)(args)


if __name__ == "__main__":
    main()
