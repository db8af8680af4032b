"""One sweep of per-container samples (``cpuacct.usage`` + the needed ``memory.stat`` keys) for N real
cgroups: the C batch reader (via cffi), the pure-Python batch reader, and a plain C program doing the same
preads and parsing on reused descriptors (the floor). ``ratio`` = native / floor.

Creates N empty cgroups under a unique ``koordlet-test-<random>`` parent in cpuacct and memory (v1),
alternates the three over several rounds, prints per-sweep medians, and removes every cgroup it made.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from koordlet.system import native
from koordlet.system.batchread import FileKind, PyBatchReader
from koordlet.system.cgroups import CgroupMode, detect_mode
from koordlet.system.paths import HostPaths
from koordlet.testing.cgroups import RealCgroupTree

NAME = "host_read"
MEM_KEYS = (
    "total_cache",
    "total_rss",
    "total_inactive_file",
    "total_active_file",
    "total_inactive_anon",
    "total_active_anon",
    "total_unevictable",
)

WALL_CLOCK = "CLOCK_MONOTONIC"
CPU_CLOCK = "CLOCK_PROCESS_CPUTIME_ID"
"""``%CLOCK%`` of the floor: wall time beside Python's wall time here; CPU time where the agent's CPU time is
the other side (``bench/collect.py``), so a loaded machine's preemption does not inflate the floor."""

FLOOR_C = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *KEYS[] = {%KEYS%};
enum { NKEYS = sizeof(KEYS) / sizeof(KEYS[0]) };

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(%CLOCK%, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) return 2;
    FILE *list = fopen(argv[1], "r");
    int sweeps = atoi(argv[2]);
    /* optional pause between sweeps (ms): a paced loop meets cold caches as a 1 Hz sampler does */
    long pause_ms = argc == 4 ? atol(argv[3]) : 0;
    if (list == NULL || sweeps <= 0) return 2;
    int cap = 1024, n = 0;
    int *fds = malloc(cap * sizeof(int)), *kinds = malloc(cap * sizeof(int));
    char line[4096];
    while (fgets(line, sizeof line, list)) {
        line[strcspn(line, "\n")] = 0;
        if (n == cap) {
            cap *= 2;
            fds = realloc(fds, cap * sizeof(int));
            kinds = realloc(kinds, cap * sizeof(int));
        }
        kinds[n] = line[0] - '0';
        fds[n] = open(line + 2, O_RDONLY | O_CLOEXEC);
        if (fds[n] < 0) { perror(line + 2); return 1; }
        n++;
    }
    static char buf[16384];
    int64_t vals[NKEYS];
    volatile int64_t sink = 0;
    double *t = malloc(sweeps * sizeof(double));
    for (int s = -1; s < sweeps; s++) {
        double t0 = now_ms();
        for (int i = 0; i < n; i++) {
            ssize_t got = pread(fds[i], buf, sizeof buf - 1, 0);
            if (got < 0) continue;
            buf[got] = 0;
            if (kinds[i] == 0) { sink += strtoll(buf, NULL, 10); continue; }
            for (int k = 0; k < NKEYS; k++) vals[k] = INT64_MIN;
            for (char *p = buf; *p;) {
                char *eol = strchr(p, '\n');
                char *sp = memchr(p, ' ', eol ? (size_t)(eol - p) : strlen(p));
                if (sp) {
                    size_t klen = (size_t)(sp - p);
                    for (int k = 0; k < NKEYS; k++)
                        if (strlen(KEYS[k]) == klen && memcmp(KEYS[k], p, klen) == 0) {
                            vals[k] = strtoll(sp + 1, NULL, 10);
                            break;
                        }
                }
                if (!eol) break;
                p = eol + 1;
            }
            for (int k = 0; k < NKEYS; k++) sink += vals[k];
        }
        if (s >= 0) t[s] = now_ms() - t0;
        if (pause_ms > 0) {
            struct timespec ts = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    qsort(t, sweeps, sizeof(double), cmp);
    printf("%.6f\n", t[sweeps / 2]);
    return 0;
}
"""


def skip(why: str) -> int:
    print(json.dumps({"bench": NAME, "skipped": why}))
    return 0


def timed_sweeps(read: Callable[[], object], sweeps: int) -> float:
    """Median ms of ``sweeps`` calls of ``read()`` (after one warm-up call)."""
    read()
    times = []
    for _ in range(sweeps):
        t0 = time.perf_counter()
        read()
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer rounds (under 50 s)")
    ap.add_argument("--containers", type=int, default=1000)
    args = ap.parse_args()
    # A SIGTERM (e.g. from `timeout`) must still run the cleanup of the cgroups we made.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if os.geteuid() != 0:
        return skip("needs root to create cgroups")
    if not native.HAS_NATIVE:
        return skip("the compiled module koordlet.system._native is not built")
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        return skip("needs gcc for the C floor")
    paths = HostPaths()
    if detect_mode(paths) is not CgroupMode.V1:
        return skip("needs cgroup v1 cpuacct and memory controllers")
    roots = {sub: paths.cgroup_root / sub for sub in ("cpuacct", "memory")}
    if not all(r.is_dir() for r in roots.values()):
        return skip("no v1 cpuacct or memory controller")
    rounds, sweeps = (5, 5) if args.quick else (11, 9)
    tree = RealCgroupTree(("cpuacct", "memory"), root=paths.cgroup_root)
    parent = tree.parent
    tmp = Path(tempfile.mkdtemp(prefix="koordlet-bench-"))
    try:
        files: list[Path] = []
        kinds: list[FileKind] = []
        keys: list[tuple[str, ...]] = []
        for i in range(args.containers):
            tree.mkdir(f"c{i}")
            files += [
                roots["cpuacct"] / parent / f"c{i}" / "cpuacct.usage",
                roots["memory"] / parent / f"c{i}" / "memory.stat",
            ]
            kinds += [FileKind.COUNTER, FileKind.KEY_VALUE]
            keys += [(), MEM_KEYS]

        src = tmp / "floor.c"
        src.write_text(
            FLOOR_C.replace("%KEYS%", ", ".join(f'"{k}"' for k in MEM_KEYS)).replace("%CLOCK%", WALL_CLOCK)
        )
        exe = tmp / "floor"
        subprocess.run([gcc, "-O2", "-o", str(exe), str(src)], check=True, capture_output=True)
        listing = tmp / "files.txt"
        listing.write_text("".join(f"{int(k)} {f}\n" for f, k in zip(files, kinds, strict=True)))

        c_reader = native.NativeBatchReader(files, kinds, keys)
        py_reader = PyBatchReader(files, kinds, keys)
        c_first, py_first = c_reader.read(), py_reader.read()
        same = c_first.status == py_first.status and c_first.values == py_first.values
        ok = all(s == 0 for s in c_first.status)

        c_ms: list[float] = []
        py_ms: list[float] = []
        floor_ms: list[float] = []
        gc.collect()
        for r in range(rounds):
            # alternate the order so neither side always runs on a warmer cache
            order = ("c", "py", "floor") if r % 2 == 0 else ("floor", "py", "c")
            for who in order:
                if who == "c":
                    c_ms.append(timed_sweeps(c_reader.read, sweeps))
                elif who == "py":
                    py_ms.append(timed_sweeps(py_reader.read, sweeps))
                else:
                    out = subprocess.run(
                        [str(exe), str(listing), str(sweeps)], check=True, capture_output=True, text=True
                    )
                    floor_ms.append(float(out.stdout.strip()))
        c_reader.close()
        py_reader.close()
    finally:
        tree.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)

    native_med, py_med, floor_med = (statistics.median(x) for x in (c_ms, py_ms, floor_ms))
    print(
        f"containers={args.containers} files={len(files)} rounds={rounds} sweeps/round={sweeps}",
        file=sys.stderr,
    )
    print(f"native per round (ms): {[round(x, 3) for x in c_ms]}", file=sys.stderr)
    print(f"python per round (ms): {[round(x, 3) for x in py_ms]}", file=sys.stderr)
    print(f"floor  per round (ms): {[round(x, 3) for x in floor_ms]}", file=sys.stderr)
    print(
        json.dumps(
            {
                "bench": NAME,
                "containers": args.containers,
                "files": len(files),
                "rounds": rounds,
                "native_sweep_ms": round(native_med, 3),
                "python_sweep_ms": round(py_med, 3),
                "floor_c_sweep_ms": round(floor_med, 3),
                "native_per_container_us": round(native_med * 1000 / args.containers, 2),
                "python_over_floor": round(py_med / floor_med, 3),
                "same_results": same,
                "all_read_ok": ok,
                "ratio": round(native_med / floor_med, 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
