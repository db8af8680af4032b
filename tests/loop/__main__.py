"""``python -m tests.loop`` (``make loop``): the colocation loop end to end on this machine, narrated.

Needs root and cgroup v1 (real cgroups and processes as pods) and nothing else: no cluster, no container
runtime (the in-repo test API server is started for it). Every process and cgroup it made is removed at
the end, also on a failure, Ctrl-C or SIGTERM. Exit status 0 when the loop told its whole story.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from koordlet.testing.cgroups import unavailable
from tests.loop import numa, scenario
from tests.loop.report import Report, problems, summary

SCENARIOS = ("colocation", "numa")


def preflight() -> str:
    """Why this machine cannot run the loop (empty: it can)."""
    return unavailable("the loop")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.loop", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keep", action="store_true", help="keep the work directory (logs, configs) afterwards"
    )
    parser.add_argument(
        "--scenario",
        choices=[*SCENARIOS, "all"],
        default="all",
        help="colocation (load-aware placement and descheduling), numa (NodeNUMAResource and the agent's "
        "cpuset and batch-resource hooks), or both (default)",
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
    found: list[str] = []
    for name in SCENARIOS if args.scenario == "all" else (args.scenario,):
        try:
            found += run_one(name, work / name, say)
        except KeyboardInterrupt:
            found.append("interrupted")
        say("loop", f"every process stopped, every pod cgroup removed ({time.monotonic() - started:.0f}s)")
        if "interrupted" in found:
            break
    for p in found:
        print(f"FAILED: {p}", file=sys.stderr)
    if found or args.keep:
        print(f"logs and configuration kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if found else 0


def run_one(name: str, work: Path, say: Callable[[str, str], None]) -> list[str]:
    """Run one scenario; what it did not show (empty: it told its whole story)."""
    report: numa.NumaReport | Report | None = None
    try:
        report = numa.run(work, say) if name == "numa" else scenario.run(work, say)
    except KeyboardInterrupt:
        raise
    except Exception as err:
        return [f"{type(err).__name__}: {err}"]
    if isinstance(report, numa.NumaReport):
        print(numa.summary(report))
        return numa.problems(report)
    print(summary(report, scenario.HOT))
    return problems(report, scenario.HOT, scenario.NODES[1:])


if __name__ == "__main__":
    sys.exit(main())
