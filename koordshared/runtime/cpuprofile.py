"""Where a process spends its CPU, on request: the Python counterpart of Go's ``/debug/pprof/profile``.

Each sample is weighted by CPU, not wall time: every ``interval`` it reads each thread's own CPU clock and
charges the time the thread ran since the last sample to the stack it is on now, so sleeping threads cost
nothing and show nothing. Details: ``docs/modules.md``."""

from __future__ import annotations

import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType

from koordshared.runtime.httpserver import Response, text_response

DEFAULT_SECONDS = 30.0
"""Go's pprof default for ``profile``."""
MAX_SECONDS = 300.0
INTERVAL = 0.01
"""The sampling tick (100 Hz, Go's pprof rate)."""

Stack = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Profile:
    """CPU seconds per stack (thread name first, then frames outermost first) over ``wall`` seconds."""

    stacks: Mapping[Stack, float]
    wall: float

    @property
    def cpu(self) -> float:
        return sum(self.stacks.values())

    def collapsed(self) -> str:
        rows = sorted(self.stacks.items(), key=lambda kv: -kv[1])
        return "".join(f"{';'.join(stack)} {round(cpu * 1e6)}\n" for stack, cpu in rows if cpu > 0)

    def top(self, limit: int = 40) -> str:
        """Functions by their own CPU (the innermost frame) and their total (anywhere on the stack)."""
        own: defaultdict[str, float] = defaultdict(float)
        total: defaultdict[str, float] = defaultdict(float)
        for stack, cpu in self.stacks.items():
            frames = stack[1:]
            if frames:
                own[frames[-1]] += cpu
            for frame in set(frames):
                total[frame] += cpu
        head = (
            f"# {self.cpu:.3f} s of CPU in {self.wall:.1f} s "
            f"({100 * self.cpu / max(self.wall, 1e-9):.2f} % of a core)\n"
            f"{'own s':>9} {'own %':>6} {'total s':>9} {'total %':>7}  function\n"
        )
        whole = max(self.cpu, 1e-9)
        lines = [
            f"{own[f]:9.3f} {100 * own[f] / whole:6.1f} {total[f]:9.3f} {100 * total[f] / whole:7.1f}  {f}\n"
            for f, _ in sorted(total.items(), key=lambda kv: (-own[kv[0]], -kv[1]))[:limit]
        ]
        return head + "".join(lines)


def _frames(frame: FrameType | None) -> Stack:
    out: list[str] = []
    while frame is not None:
        code = frame.f_code
        out.append(f"{frame.f_globals.get('__name__', '?')}.{code.co_name}")
        frame = frame.f_back
    return tuple(reversed(out))


def _cpu_clock(ident: int) -> float | None:
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (OSError, ValueError, OverflowError):
        return None  # the thread ended between the listing and the read


def sample(
    seconds: float,
    interval: float = INTERVAL,
    *,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Profile:
    """Profile every other thread of this process for ``seconds`` (less when ``stop`` is set)."""
    me = threading.get_ident()
    last: dict[int, float] = {}
    stacks: defaultdict[Stack, float] = defaultdict(float)
    stop = stop or threading.Event()
    started = clock()
    deadline = started + seconds
    while True:
        frames = sys._current_frames()
        for thread in threading.enumerate():
            ident = thread.ident
            if ident is None or ident == me:
                continue
            now = _cpu_clock(ident)
            if now is None:
                continue
            before = last.get(ident)
            last[ident] = now
            if before is not None and now > before:
                stacks[(thread.name, *_frames(frames.get(ident)))] += now - before
        del frames  # frames hold their threads' locals alive
        left = deadline - clock()
        if left <= 0 or stop.wait(min(interval, left)):
            break
    return Profile(dict(stacks), clock() - started)


def thread_stacks() -> str:
    """Every thread's current stack, innermost frame last, with its CPU so far."""
    frames = sys._current_frames()
    out = []
    for thread in sorted(threading.enumerate(), key=lambda t: t.name):
        if thread.ident is None:
            continue
        cpu = _cpu_clock(thread.ident)
        spent = f"{cpu:.3f} s CPU" if cpu is not None else "ended"
        out.append(f"thread {thread.name} ({spent}, daemon={thread.daemon}):\n")
        out.extend(f"    {f}\n" for f in _frames(frames.get(thread.ident)))
    return "".join(out)


def profile_route(query: Mapping[str, list[str]]) -> Response:
    """``GET /debug/pprof/profile?seconds=30[&format=top]``: blocks for the profile's duration."""
    raw = (query.get("seconds") or [str(DEFAULT_SECONDS)])[0]
    try:
        seconds = float(raw)
    except ValueError:
        return text_response(f"seconds={raw!r}: want a number of seconds, e.g. seconds=30\n", 400)
    if not 0 < seconds <= MAX_SECONDS:
        return text_response(f"seconds={raw}: want more than 0 and at most {MAX_SECONDS:.0f}\n", 400)
    form = (query.get("format") or ["collapsed"])[0]
    if form not in ("collapsed", "top"):
        return text_response(f"format={form!r}: want collapsed (flame graph input) or top\n", 400)
    prof = sample(seconds)
    return text_response(prof.top() if form == "top" else prof.collapsed())


def threads_route(_query: Mapping[str, list[str]]) -> Response:
    """``GET /debug/pprof/threads``: every thread's stack now."""
    return text_response(thread_stacks())
