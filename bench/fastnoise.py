"""Noise of the fast path's non-BE samples on the real kernel, and what the fast path's triggers make of it.

One LS process burns a core in a Burstable pod while BE pods burn every CPU under a fixed tier quota
(``--be-quota`` cores); nothing changes during the run, so every rise the fast path would see is noise.
For each window length (50 ms, the fast sampler's interval; 10 ms, its confirm window) the bench reads
the root cgroup's and the BE tier's ``cpuacct.usage`` back to back for ``--seconds`` and prints non-BE
cores per window: mean, standard deviation, p90, p99 and the largest excursion above the mean.

It then replays the 50 ms samples against the decision a steady periodic tick would hold (their mean) and
counts how many would fire: with a fixed trigger of 1 % of the node (the first fast path's rule) and with
``qosplugins.cpusuppress.fastrise.RiseDetector`` (the learnt band, ``band_cores`` as it ended; ``fires_held``:
smaller rises that held over an interval). Every fire here is a BE shrink on noise.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time

from koordlet.api import KubeQOSClass
from koordlet.testing.cgroups import RealKubepods
from qosplugins.cpusuppress.fastrise import RiseDetector

CPUS = os.cpu_count() or 1
FIXED_TRIGGER = 0.01
"""The old fast-path trigger, a fraction of the node."""


def windows(kp: RealKubepods, be_dir: str, window: float, seconds: float) -> list[tuple[float, float]]:
    """``(time, non-BE cores)`` per ``window`` for ``seconds``."""

    def snap() -> tuple[float, int, int]:
        return time.monotonic(), kp.cpu_usage_ns("") or 0, kp.cpu_usage_ns(be_dir) or 0

    out = []
    a = snap()
    end = a[0] + seconds
    while a[0] < end:
        time.sleep(window)
        b = snap()
        out.append((b[0], ((b[1] - a[1]) - (b[2] - a[2])) / 1e9 / (b[0] - a[0])))
        a = b
    return out


def spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    n, mean = len(ordered), statistics.fmean(ordered)
    return {
        "n": n,
        "mean_cores": round(mean, 3),
        "sd_cores": round(statistics.pstdev(ordered), 3),
        "p90_cores": round(ordered[int(n * 0.9)], 3),
        "p99_cores": round(ordered[int(n * 0.99)], 3),
        "max_above_mean_cores": round(ordered[-1] - mean, 3),
    }


def replay(samples: list[tuple[float, float]]) -> dict[str, float]:
    """Fires on these steady samples: the fixed 1 % trigger and the learnt band, both against the mean."""
    mean = statistics.fmean(v for _t, v in samples)
    fixed = sum(1 for _t, v in samples if v - mean >= FIXED_TRIGGER * CPUS)
    detector = RiseDetector()
    learnt = held = 0
    for t, v in samples:
        learnt += detector.observe(t, v, mean, FIXED_TRIGGER * CPUS)
        held += detector.held() is not None
    band = round(detector.band or 0.0, 3)
    return {"fires_fixed_1pct": fixed, "fires_learnt_band": learnt, "fires_held": held, "band_cores": band}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds per window length")
    ap.add_argument("--be-quota", type=float, default=0.3, help="BE tier quota, cores")
    args = ap.parse_args()
    # A SIGTERM (e.g. from `timeout`) must still run the cleanup of the cgroups and processes we made.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if os.geteuid() != 0:
        print(json.dumps({"bench": "fastnoise", "skipped": "needs root to create cgroups"}))
        return
    kp = RealKubepods()
    try:
        be_dir = f"{kp.kubepods}/besteffort"
        kp.path("cpu", be_dir, "cpu.cfs_quota_us").write_text(str(int(args.be_quota * 100000)))
        be = kp.add_container(kp.add_pod(KubeQOSClass.BESTEFFORT))
        for _ in range(CPUS):
            kp.busy(be)
        kp.busy(kp.add_container(kp.add_pod(KubeQOSClass.BURSTABLE)))
        time.sleep(1.0)
        out: dict[str, object] = {"bench": "fastnoise", "cpus": CPUS, "be_quota_cores": args.be_quota}
        for window in (0.05, 0.01):
            print(f"  {window * 1000:.0f} ms windows for {args.seconds:.0f} s ...", flush=True)
            samples = windows(kp, be_dir, window, args.seconds)
            row: dict[str, float] = spread([v for _t, v in samples])
            if window == 0.05:
                row |= replay(samples)
            out[f"window_{window * 1000:.0f}ms"] = row
        print(json.dumps(out))
    finally:
        kp.cleanup()


if __name__ == "__main__":
    main()
