"""``koordlet demo`` as a user runs it (root, real cgroups): it finishes, its PNG's numbers are the agent's
audit log (fetched by this test from the demo's agent while it ran), the spike is marked where the LS
pod's CPU rose, it printed the top view, and no cgroup or process of it is left; Ctrl-C and SIGTERM clean
up as well."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from koordlet.testing.agent import get_json
from koordlet.testing.cgroups import CGROUP_ROOT, KUBEPODS_CONTROLLERS
from tests.support.pngread import pixels, text_chunks
from tests.support.terminal import sigint_reaches_children

pytestmark = [pytest.mark.root, pytest.mark.slow]
DURATION = 30.0
PR_SET_CHILD_SUBREAPER = 36


@contextlib.contextmanager
def subreaper() -> Iterator[None]:
    """Orphans of this process's descendants are re-parented to it, so a process the demo leaked is
    still found among our children."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


class DemoRun:
    """``koordlet demo`` as a child process; its output lines, and the agent's audit log polled from the
    moment the demo names the agent until the demo ends."""

    def __init__(self, *args: str) -> None:
        self.lines: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.agent = threading.Event()
        self.base = ""
        with sigint_reaches_children():
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "koordlet", "demo", *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.poller = threading.Thread(target=self._poll, daemon=True)
        self.poller.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            m = re.match(r"agent: (http://\S+)", line)
            if m:
                self.base = m.group(1)
                self.agent.set()

    def _poll(self) -> None:
        self.agent.wait(60)
        seq = 0
        while self.proc.poll() is None:
            with contextlib.suppress(OSError, AssertionError, ValueError):
                new = get_json(f"{self.base}/events?since={seq}&limit=10000")["events"]
                self.events.extend(new)
                seq = new[-1]["seq"] if new else seq
            time.sleep(0.3)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def parent(self) -> str:
        m = re.search(r"sandbox: kubepods under /(\S+) in", self.output)
        assert m, self.output
        return m.group(1)

    def wait(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
        self.reader.join(10)
        self.poller.join(10)
        return code


def assert_nothing_left(parent: str, before: set[int]) -> None:
    left = [
        p
        for p in psutil.Process().children(recursive=True)
        if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE
    ]
    for p in left:  # clean up what the demo leaked before failing
        with contextlib.suppress(psutil.Error):
            p.kill()
    assert not left, [p.cmdline() for p in left]
    for controller in KUBEPODS_CONTROLLERS:
        assert not (CGROUP_ROOT / controller / parent).exists(), f"{controller}/{parent} left behind"


def be_writes(events: list[dict[str, Any]], parent: str, cpus: int) -> list[dict[str, Any]]:
    """The BE tier's quota writes by BECPUSuppress, as this test reads the audit log."""
    tier = f"/cpu/{parent}/kubepods/besteffort/cpu.cfs_quota_us"
    out = []
    for e in events:
        if e["owner"] == "BECPUSuppress" and e["path"].endswith(tier) and e["phase"] == "final":
            quota = int(e["after"])
            m = re.search(r"non-BE (-?\d+)m", e["reason"])  # absent from "recover: ..." writes
            non_be = int(m.group(1)) / 1000 if m else None
            out.append({**e, "cores": cpus if quota < 0 else quota / 100000, "nonBE": non_be})
    return out


def mean(points: list[list[float]], t0: float, t1: float) -> float:
    vals = [p[1] for p in points if t0 <= p[0] < t1]
    assert vals, (t0, t1)
    return sum(vals) / len(vals)


@pytest.mark.timeout(200)
def test_demo_plots_what_the_agent_did_and_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with subreaper():
        run = DemoRun("--duration", f"{DURATION:g}", "--out", str(out))
        code = run.wait(150)
        assert code == 0, run.output
        assert_nothing_left(run.parent(), before)
    png = (out / "koordlet-demo.png").read_bytes()
    width, height, _rgb = pixels(png)
    assert width > 0 and height > 0
    doc = json.loads(text_chunks(png)["koordlet-demo"])
    s, cpus, t0 = doc["series"], doc["cpus"], doc["startedAt"]

    # the plotted BE allowance is the agent's audit log: every write the test saw during the run, at its
    # time, with its value, and nothing else; the first point is the setting in force when the run began
    writes = be_writes(run.events, run.parent(), cpus)
    assert writes, run.output
    seen = max(e["seq"] for e in run.events)
    last = max(p[0] for p in s["lsDemand"])  # the run's last sample: the agent's restore at stop is after it
    during = [w for w in writes if t0 < w["time"] <= t0 + last]
    plotted = [p for p in s["beAllowance"][1:] if p[2] <= seen]
    assert plotted == [[round(w["time"] - t0, 3), round(w["cores"], 5), w["seq"]] for w in during]
    assert [p for p in s["nonBE"] if p[2] <= seen] == [
        [round(w["time"] - t0, 3), w["nonBE"], w["seq"]] for w in during if w["nonBE"] is not None
    ]
    earlier = [w for w in writes if w["time"] <= t0]
    assert s["beAllowance"][0][1] == pytest.approx(earlier[-1]["cores"] if earlier else cpus)

    # the spike is marked where the demo drove it, and the LS pod's CPU rose there
    spike = doc["spike"]
    assert 0 < spike["start"] < spike["end"] <= DURATION + 1
    assert spike["end"] - spike["start"] == pytest.approx(0.35 * DURATION, abs=2.0)
    rise = mean(s["lsDemand"], spike["start"] + 2, spike["end"]) - mean(
        s["lsDemand"], spike["start"] - 4, spike["start"]
    )
    assert rise > 0.25 * spike["lsAskCores"], (rise, s["lsDemand"])
    assert min(p[0] for p in s["lsDemand"]) < 1.0 and max(p[0] for p in s["lsDemand"]) >= DURATION - 1

    # shown live in top's form, then summed up
    assert "PODS 4" in run.output and "default/web" in run.output and "BE   budget" in run.output
    summary = (out / "koordlet-demo.txt").read_text()
    assert "LS spike at" in summary and summary in run.output + "\n"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_demo_removes_everything(tmp_path: Path, sig: int) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with subreaper():
        run = DemoRun("--duration", "60", "--out", str(tmp_path))
        assert run.agent.wait(60), run.output
        time.sleep(2)
        os.kill(run.proc.pid, sig)
        code = run.wait(60)
        assert code == 130, run.output
        assert "interrupted: everything the demo made is removed" in run.output
        assert_nothing_left(run.parent(), before)
    assert not (tmp_path / "koordlet-demo.png").exists()
