"""``python -m tests.loop`` (``make loop``): the colocation loop end to end on this machine, narrated.

Needs root and cgroup v1 (real cgroups and processes as pods) and nothing else: no cluster, no container
runtime (the in-repo test API server is started for it). Every process and cgroup it made is removed at
the end, also on a failure, Ctrl-C or SIGTERM. Exit status 0 when the loop told its whole story.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

from tests.loop import scenario
from tests.loop.report import problems, summary

CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory")


def preflight() -> str:
    """Why this machine cannot run the loop (empty: it can)."""
    if os.geteuid() != 0:
        return "the loop makes real cgroups and moves processes into them: run it as root"
    missing = [c for c in CONTROLLERS if not Path("/sys/fs/cgroup", c, "cgroup.procs").exists()]
    if missing:
        mounted = ", ".join(missing)
        return f"the loop needs cgroup v1 with the {mounted} controller(s) mounted under /sys/fs/cgroup"
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.loop", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keep", action="store_true", help="keep the work directory (logs, configs) afterwards"
    )
    args = parser.parse_args(argv)
    why = preflight()
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="koordlet-loop-"))
    started = time.monotonic()

    def say(who: str, text: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {who:<26} {text}", flush=True)

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt  # the same clean-up as Ctrl-C

    signal.signal(signal.SIGTERM, on_term)
    report, failure = None, ""
    try:
        report = scenario.run(work, say)
    except KeyboardInterrupt:
        failure = "interrupted"
    except Exception as err:
        failure = f"{type(err).__name__}: {err}"
    say("loop", f"every process stopped, every pod cgroup removed ({time.monotonic() - started:.0f}s)")
    found = problems(report, scenario.HOT, scenario.NODES[1:]) if report is not None else [failure]
    if report is not None:
        print(summary(report, scenario.HOT))
    for p in found:
        print(f"FAILED: {p}", file=sys.stderr)
    if found or args.keep:
        print(f"logs and configuration kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
