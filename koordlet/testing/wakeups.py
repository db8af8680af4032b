"""Counting a thread's wake-ups, for tests that a quiet thread stays asleep (on a VM each timed
wake-up of a Python thread costs ~0.1 ms of CPU, most of an idle agent's cost).

A thread that sleeps and wakes switches out voluntarily each time; preemption on a busy machine is counted
apart (``nonvoluntary_ctxt_switches``), so the figure does not depend on the load.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from pathlib import Path


def voluntary_switches(thread: threading.Thread) -> int:
    """The thread's voluntary context switches so far (Linux ``/proc/self/task/<tid>/status``)."""
    status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
    return int(status.split("voluntary_ctxt_switches:")[1].split()[0])


def stop_and_close(stop: threading.Event, close: Callable[[], None], thread: threading.Thread) -> float:
    """Set ``stop``, call ``close`` (what a component's shutdown does to wake its sleeping thread) and join
    the thread; the seconds it took to end (``inf`` if it did not within 5 s)."""
    stop.set()
    started = time.monotonic()
    close()
    thread.join(5)
    return math.inf if thread.is_alive() else time.monotonic() - started
