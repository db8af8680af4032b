"""Python's garbage collector for a process whose heap is mostly its informer caches (koord-scheduler and
its extender): no collection while the caches fill, then everything alive at sync moved out of the
collector's view.

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


def hold() -> None:
    """No automatic collection until :func:`settle` (called before the caches fill)."""
    gc.disable()


def settle(*, collect: bool, young_threshold: int | None = None) -> None:
    """Freeze what is alive now and collect again from here on. ``collect`` first collects what the start
    left behind (a full pass: worth it where nothing waits on it, e.g. before readiness);
    ``young_threshold`` replaces the first generation's threshold (700)."""
    started = time.perf_counter()
    found = gc.collect() if collect else 0
    gc.freeze()
    if young_threshold is not None:
        gc.set_threshold(young_threshold, *gc.get_threshold()[1:])
    gc.enable()
    log.info(
        "heap settled: %d objects frozen, %d collected in %.0f ms",
        gc.get_freeze_count(),
        found,
        (time.perf_counter() - started) * 1000,
    )
