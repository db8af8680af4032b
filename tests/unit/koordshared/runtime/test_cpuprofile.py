"""The CPU profiler behind ``--enable-pprof``: CPU charged to the stack that spent it, sleepers charged
nothing, and the route's arguments checked."""

from __future__ import annotations

import threading
import time

import pytest

from koordshared.runtime import cpuprofile


def _burn_for_the_profiler(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for i in range(2000):
            x += i * i


def _thread_cpu(t: threading.Thread) -> float:
    assert t.ident is not None
    return time.clock_gettime(time.pthread_getcpuclockid(t.ident))


def test_cpu_goes_to_the_busy_stack_and_a_sleeper_costs_nothing() -> None:
    stop = threading.Event()
    busy = threading.Thread(target=_burn_for_the_profiler, args=(stop,), name="test-burner")
    sleeper = threading.Thread(target=stop.wait, name="test-sleeper")
    busy.start()
    sleeper.start()
    try:
        before = _thread_cpu(busy)
        prof = cpuprofile.sample(1.0)
        spent = _thread_cpu(busy) - before
    finally:
        stop.set()
        busy.join(5)
        sleeper.join(5)
    charged = {stack: cpu for stack, cpu in prof.stacks.items() if stack[0] == "test-burner"}
    burner = sum(charged.values())
    # what the burner spent while sampled, less at most the tick after the last sample
    assert 0.8 * spent - cpuprofile.INTERVAL <= burner <= spent + 1e-6, (burner, spent)
    # on the burner's own frame, or in what it calls (``Event.is_set`` is Python code too)
    assert all(any(f.endswith("._burn_for_the_profiler") for f in stack) for stack in charged), charged
    # a thread blocked in a wait costs nothing (beyond the tail of its start on a loaded machine: it may
    # reach its wait only after the first sample)
    assert sum(cpu for stack, cpu in prof.stacks.items() if stack[0] == "test-sleeper") < 0.005
    assert 0.9 <= prof.wall < 5
    collapsed = prof.collapsed().splitlines()
    assert collapsed[0].startswith("test-burner;") and collapsed[0].endswith(
        f" {round(max(charged.values()) * 1e6)}"
    )
    top = prof.top()
    assert "% of a core" in top.splitlines()[0]
    assert top.splitlines()[2].endswith("._burn_for_the_profiler")  # the most own CPU first


def test_a_profile_ends_when_asked() -> None:
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    started = time.monotonic()
    cpuprofile.sample(60, stop=stop)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ({"seconds": ["abc"]}, "want a number"),
        ({"seconds": ["0"]}, "more than 0"),
        ({"seconds": ["301"]}, "at most 300"),
        ({"seconds": ["0.1"], "format": ["svg"]}, "collapsed"),
    ],
)
def test_bad_profile_arguments_are_refused_with_the_reason(query: dict[str, list[str]], said: str) -> None:
    status, _, body = cpuprofile.profile_route(query)
    assert status == 400 and said in body.decode()


def test_thread_stacks_name_every_thread() -> None:
    text = cpuprofile.threads_route({})[2].decode()
    assert "thread MainThread" in text and ".test_thread_stacks_name_every_thread" in text
