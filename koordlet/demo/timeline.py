"""The demo's run: a quiet start, an LS spike, a calm end, with the agent's ``/status`` and audit log
(``/events``) recorded twice a second. What is plotted and summed up afterwards comes from this record
only (:mod:`~koordlet.demo.report`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from koordlet.demo.sandbox import Sandbox

SAMPLE_SECONDS = 0.5
SPIKE_AT, CALM_AT = 0.35, 0.7
"""Phase boundaries as fractions of the duration."""


@dataclass
class Recording:
    started_at: float
    """Wall-clock start (audit times are wall-clock); the plot's zero."""
    duration: float
    cpus: int
    spike: tuple[float, float] = (0.0, 0.0)
    """Seconds after the start."""
    ls_idle: float = 0.0
    ls_spike: float = 0.0
    docs: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def at(self, wall: float) -> float:
        return round(wall - self.started_at, 3)


Watcher = Callable[[dict[str, Any], str, float], None]
"""``(status document, phase, seconds since the start)`` after each sample."""


def record(sandbox: Sandbox, duration: float, stop: threading.Event, watch: Watcher) -> Recording:
    """Drive the phases and sample until ``duration`` has passed (or ``stop`` is set)."""
    agent = sandbox.agent
    assert agent is not None, "start the sandbox first"
    rec = Recording(
        time.time(), duration, sandbox.cpus, ls_idle=sandbox.ls_idle, ls_spike=sandbox.ls_spike_cores
    )
    start = time.monotonic()
    phase, seq = "quiet", 0
    while not stop.is_set():
        t = time.monotonic() - start
        if phase == "quiet" and t >= SPIKE_AT * duration:
            sandbox.spike()
            phase, spike_start = "spike", rec.at(time.time())
        elif phase == "spike" and t >= CALM_AT * duration:
            sandbox.calm()
            phase = "calm"
            rec.spike = (spike_start, rec.at(time.time()))
        new = agent.get(f"/events?since={seq}&limit=10000")["events"]
        rec.events.extend(new)
        seq = new[-1]["seq"] if new else seq
        doc = agent.get("/status?window=1")
        rec.docs.append(doc)
        watch(doc, phase, t)
        if t >= duration:
            break
        stop.wait(max(SAMPLE_SECONDS - (time.monotonic() - start - t), 0.0))
    if phase == "spike":  # stopped early
        sandbox.calm()
        rec.spike = (spike_start, rec.at(time.time()))
    return rec
