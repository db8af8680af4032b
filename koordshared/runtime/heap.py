"""Python's garbage collector for a process whose heap is mostly its informer caches (koord-scheduler, its
extender, koord-manager, koord-descheduler): next to no collection while the caches fill, then everything
alive at sync moved out of the collector's view.

While a list decodes and trims thousands of objects that all survive, the collector's default thresholds
run it hundreds of times over a growing heap, each full pass walking every cached object; once synced, a
full pass over millions of cached objects costs tens to hundreds of milliseconds that land on one
scheduling cycle or one /filter call. The caches hold no reference cycles worth collecting (decoded JSON
is trees), so what is frozen stays alive anyway.
"""

from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger(__name__)


HOLD_THRESHOLD = 200_000
"""While held, the first generation is collected every 200 000 new objects instead of every 700: a list of
100 000 pods triggers a handful of passes, not thousands, and a start that never syncs (an API server down
for hours, each failed list leaving a traceback's reference cycles) still has its garbage collected."""

_held: tuple[int, int, int] | None = None
"""The thresholds :func:`hold` replaced, for :func:`settle` to put back."""


def hold() -> None:
    """Collect rarely until :func:`settle` (called before the caches fill)."""
    global _held
    if _held is None:
        _held = gc.get_threshold()
    gc.set_threshold(HOLD_THRESHOLD, *_held[1:])


def settle(*, collect: bool, thresholds: tuple[int, int, int] | None = None) -> None:
    """Freeze what is alive now and collect again from here on, at ``thresholds`` (by default those
    before :func:`hold`). ``collect`` first collects what the start left behind (a full pass: worth it
    where nothing waits on it, e.g. before readiness)."""
    global _held
    started = time.perf_counter()
    found = gc.collect() if collect else 0
    gc.freeze()
    before, _held = _held or gc.get_threshold(), None
    gc.set_threshold(*(thresholds or before))
    log.info(
        "heap settled: %d objects frozen, %d collected in %.0f ms",
        gc.get_freeze_count(),
        found,
        (time.perf_counter() - started) * 1000,
    )
