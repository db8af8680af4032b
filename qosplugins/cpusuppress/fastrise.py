"""Telling a real rise of non-BE CPU from sampling noise in the ~40 ms fast samples (BECPUSuppress).

A 50 ms window reads a steady load with a spread, and a fixed trigger fired on that noise several times a
second. :class:`RiseDetector` learns the spread (the band) from the samples themselves, in 0.5 s blocks
(the median block's spread), fires on a rise of several bands, and reports a smaller rise that holds over
an interval (:meth:`RiseDetector.held`). Details: ``docs/modules.md``."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from statistics import median

MIN_BLOCK_SAMPLES = 3
"""A block with fewer samples (the agent stalled) says nothing about the spread."""
HELD_SAMPLES = 3
"""Samples in a run that :meth:`RiseDetector.held` reports: the window, its confirm window and the next."""
SUSTAINED_GAP = 0.15
"""Seconds: two samples that must both show a rise are at most this far apart (the ~40 ms interval, or
the 10 ms confirm window, with room for a late tick)."""


@dataclass(slots=True)
class RiseDetector:
    """Per fast sample: does non-BE usage stand above the decision by more than the noise?"""

    block: float = 0.5
    """Seconds per block of samples whose spread is measured."""
    blocks: int = 5
    multiple: float = 2.5
    """A rise must exceed the decision by this many bands (bounded noise does not; a core does)."""
    level_span: float = 0.25
    held_multiple: float = 1.5
    """A rise of this many bands seen in every sample over ``held_span`` is real (module doc)."""
    held_span: float = 0.04
    """Seconds from a run's first sample to its last (one interval: the windows cover two, plus the
    confirm window)."""
    band: float | None = None
    """The learnt spread (the unit of the samples); ``None`` until a block is complete."""
    _block_start: float | None = None
    _current: list[float] = field(default_factory=list)
    _spreads: deque[float] = field(default_factory=deque)
    _recent: deque[tuple[float, float]] = field(default_factory=deque)
    """``(time, value)`` of every sample within ``level_span``."""
    _last_rise: tuple[float, float] | None = None
    """``(time, value)`` of the previous sample when it was a rise."""
    _run: list[tuple[float, float]] = field(default_factory=list)
    """``(time, value)`` of the current run of samples ``held_multiple`` bands above ``_run_baseline``."""
    _run_baseline: float | None = None

    def observe(self, t: float, value: float, baseline: float | None, floor: float) -> bool:
        """Record a sample; whether it is a rise of more than the noise over ``baseline`` (the
        decision's estimate; ``None``: no decision yet, nothing can fire)."""
        self._trim(t)
        self._recent.append((t, value))
        if self._block_start is None:
            self._block_start = t
        elif t - self._block_start >= self.block:
            self._close_block(t)
        band = self.band
        rise = None if baseline is None else value - baseline
        if rise is None or band is None:
            self._current.append(value)
            return False
        self._extend_run(t, value, baseline, rise >= max(floor, self.held_multiple * band))
        if rise >= max(floor, self.multiple * band):
            return True
        self._current.append(value)
        return False

    def _extend_run(self, t: float, value: float, baseline: float | None, above: bool) -> None:
        run = self._run
        if not above:
            run.clear()
            return
        if run and (baseline != self._run_baseline or t - run[-1][0] > SUSTAINED_GAP):
            run.clear()
        self._run_baseline = baseline
        run.append((t, value))

    def held(self) -> float | None:
        """The lowest sample of a run that held (module doc), once per run; ``None`` otherwise."""
        run = self._run
        if len(run) < HELD_SAMPLES or run[-1][0] - run[0][0] < self.held_span:
            return None
        lowest = min(v for _t, v in run)
        run.clear()
        return lowest

    def sustained(self, t: float, value: float, rose: bool, max_gap: float = SUSTAINED_GAP) -> float | None:
        """The rise this sample and the one before it (at most ``max_gap`` seconds earlier) both show:
        the lower of the two, or ``None`` when either did not rise. One window of other work (a daemon's
        burst, a collector's sweep) rises alone; an LS load that starts rises in its window and in the
        confirm window the sampler takes right after."""
        last, self._last_rise = self._last_rise, (t, value) if rose else None
        if not rose or last is None or t - last[0] > max_gap:
            return None
        return min(last[1], value)

    def _close_block(self, t: float) -> None:
        current = self._current
        if len(current) >= MIN_BLOCK_SAMPLES:
            self._spreads.append(max(current) - median(current))
            while len(self._spreads) > self.blocks:
                self._spreads.popleft()
            self.band = median(self._spreads)
        self._current = []
        self._block_start = t

    def level(self, now: float) -> float | None:
        """The median of the samples of the last ``level_span`` seconds (``None`` without any)."""
        self._trim(now)
        return median(v for _t, v in self._recent) if self._recent else None

    def _trim(self, now: float) -> None:
        recent = self._recent
        while recent and recent[0][0] < now - self.level_span:
            recent.popleft()
