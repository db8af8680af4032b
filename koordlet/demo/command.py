"""``koordlet demo``: colocation on this machine in a minute, shown live in ``koordlet top``'s form.

Needs root and cgroup v1 (it makes real cgroups and moves processes into them); without them it says so
and exits 2. It builds the sandbox (:mod:`~koordlet.demo.sandbox`), runs the agent against it, drives an
LS spike (:mod:`~koordlet.demo.timeline`), then writes ``koordlet-demo.png`` (LS demand, BE allowance, BE
use, the spike shaded; the numbers in a ``tEXt`` chunk) and ``koordlet-demo.txt`` (the summary) into
``--out``. Everything it made is removed at the end, also on Ctrl-C or SIGTERM (exit 130).
"""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import click

from koordlet.demo import report
from koordlet.demo.sandbox import NODE, Sandbox
from koordlet.demo.timeline import record
from koordlet.testing.cgroups import unavailable
from koordlet.top.command import ENTER, LEAVE, frame
from koordlet.top.render import render

PROGRESS_SECONDS = 5.0


class View:
    """The live view: full-screen frames on a terminal; elsewhere a progress line every few seconds and
    the top view at three moments (before the spike, in it, at the end)."""

    def __init__(self, where: str, duration: float, spike_ask: float) -> None:
        self.tty = sys.stdout.isatty()
        self.where, self.duration, self.spike_ask = where, duration, spike_ask
        self.last_line = -PROGRESS_SECONDS
        self.shown: set[str] = set()
        self.prev: dict[str, Any] | None = None

    def banner(self, phase: str, t: float) -> str:
        what = {
            "quiet": "LS idle, BE greedy",
            "spike": f"LS spike: +{self.spike_ask:g} cores asked",
            "calm": "spike over: BE grows back",
        }
        return f"koordlet demo · {t:5.1f}s / {self.duration:g}s · {what[phase]} · Ctrl-C stops and cleans up"

    def __call__(self, doc: dict[str, Any], phase: str, t: float) -> None:
        if self.tty:
            size = shutil.get_terminal_size()
            lines = [
                self.banner(phase, t),
                *render(doc, where=self.where, width=size.columns, height=size.lines - 1, prev=self.prev),
            ]
            sys.stdout.write(frame([line[: size.columns] for line in lines]))
        else:
            if t - self.last_line >= PROGRESS_SECONDS:
                be = doc["beCPU"]
                ls = sum(p["cpuCores"] or 0 for p in doc["pods"] if p["qos"] != "BE")
                click.echo(
                    f"[{t:5.1f}s] {phase:<5}  LS {ls:.2f} cores  BE allowed {be['allowedCores'] or 0:.2f}"
                    f"  BE using {be['usedCores'] or 0:.2f}"
                )
                self.last_line = t
            moment = {
                "quiet": t >= 0.3 * self.duration,
                "spike": t >= 0.5 * self.duration,
                "calm": t >= self.duration,
            }
            if moment.get(phase) and phase not in self.shown:
                self.shown.add(phase)
                click.echo(
                    "\n".join(["", self.banner(phase, t), *render(doc, where=self.where, prev=self.prev), ""])
                )
        sys.stdout.flush()
        self.prev = doc

    def start(self) -> None:
        if self.tty:
            sys.stdout.write(ENTER)

    def end(self) -> None:
        if self.tty:
            sys.stdout.write(LEAVE)
            sys.stdout.flush()


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@click.command("demo", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option(
    "--duration",
    type=click.FloatRange(min=15, max=3600),
    default=60.0,
    show_default=True,
    help="seconds of the run (the set-up and clean-up add a few)",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="directory for koordlet-demo.png and koordlet-demo.txt",
)
@click.option(
    "--policy",
    type=click.Choice(["cfsQuota", "cpuset"]),
    default="cfsQuota",
    show_default=True,
    help="BE suppression policy (cpuset keeps BE on at least 2 CPUs: it shows little below 4)",
)
@click.option(
    "--threshold",
    type=click.IntRange(1, 100),
    default=65,
    show_default=True,
    help="cpuSuppressThresholdPercent: the share of the node LS and BE may use together",
)
@click.option("--keep", is_flag=True, help="keep the work directory (agent log, NodeSLO, pod list)")
def demo(duration: float, out: Path, policy: str, threshold: int, keep: bool) -> None:
    """Colocation on this machine: one LS and three BE pods as real cgroups and busy processes, the agent,
    an LS spike, BE suppressed and given back, shown live; then a plot and a summary."""
    why = unavailable("the demo")
    if why:
        click.echo(f"koordlet demo: {why}", err=True)
        sys.exit(2)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="koordlet-demo-"))
    stop = threading.Event()
    old = signal.signal(signal.SIGTERM, _interrupt)
    sandbox: Sandbox | None = None
    view: View | None = None
    code = 0
    try:
        sandbox = Sandbox(work, policy=policy, threshold=threshold)
        click.echo(
            f"sandbox: kubepods under /{sandbox.parent} in cpu, cpuacct, cpuset, memory; starting the agent"
        )
        agent = sandbox.start()
        click.echo(f"agent: {agent.base} (koordlet top --addr {agent.base} shows it too)")
        view = View(agent.base, duration, sandbox.ls_spike_cores)
        view.start()
        rec = record(sandbox, duration, stop, view)
        view.end()
        view = None
        doc = report.data(rec)
        png = out / "koordlet-demo.png"
        png.write_bytes(report.plot(doc, f"koordlet demo: BE CPU suppression ({policy}, {threshold}%)"))
        text = report.summary(doc, NODE, policy, threshold)
        (out / "koordlet-demo.txt").write_text(text)
        click.echo("\n" + text + f"wrote {png} and {out / 'koordlet-demo.txt'}")
    except KeyboardInterrupt:
        code = 130
    except Exception as err:  # the sandbox is removed whatever failed
        click.echo(f"koordlet demo failed: {type(err).__name__}: {err}", err=True)
        code = 1
    finally:
        if view is not None:
            view.end()
        if sandbox is not None:
            agent_code = sandbox.close()
            if agent_code not in (0, None) and code == 0:
                click.echo(f"koordlet demo: the agent exited {agent_code}; its log is in {work}", err=True)
                code, keep = 1, True
            click.echo(f"removed /{sandbox.parent} and every process the demo started")
        signal.signal(signal.SIGTERM, old)
        if keep or code == 1:
            click.echo(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if code == 130:
        click.echo("interrupted: everything the demo made is removed", err=True)
    sys.exit(code)
