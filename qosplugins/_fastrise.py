"""Telling a real rise of non-BE CPU from sampling noise in the ~50 ms fast samples (BECPUSuppress).

Layer: ``qosplugins`` (plugin-private). A 50 ms window is shorter than the 100 ms CFS period and than many
a process's bursts, so a steady load reads with a spread: one LS core beside a quota-bound BE tier reads
0.94 +- 0.10 core per window on an idle 2-CPU machine, up to +0.18 over ten seconds, and more on a busy
machine (every other process's 10 ms burst is +0.2 core in one window). A fixed 1 %-of-capacity trigger
fired on that noise several times a second: each time BE was shrunk to a noise peak and grown back by the
periodic tick, and each quota write refills the tier's runtime in the kernel, so BE used more than its
mean quota (the real-kernel e2e test caught BE at 0.29 core against a 0.24 mean).

:class:`RiseDetector` learns the spread from the samples themselves: the band is the highest sample of
the last ``span`` seconds minus their median, and a sample fires when it exceeds the decision's non-BE
estimate by ``multiple`` bands (at least the 1 % floor). Samples that fired are a new level, not noise:
the window restarts after a fire and keeps the band it had until ``min_samples`` new samples (0.5 s at
50 ms) give a new one, so a spike first seen half-way through a window (a partial rise) still fires
again at its full rate in the next window. Until the first band is known nothing fires. :meth:`level` is
the median of the last ``level_span`` seconds: a rise that has lasted that long, which the periodic
decision takes when it is above the 1 s average (one noisy window no longer steers it).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from statistics import median


@dataclass(slots=True)
class RiseDetector:
    """Per fast sample: does non-BE usage stand above the decision by more than the noise?"""

    span: float = 2.0
    """Seconds of samples the noise band is learnt from."""
    multiple: float = 2.0
    """A rise must exceed the decision by this many bands (bounded noise never does; a core does)."""
    min_samples: int = 10
    level_span: float = 0.25
    band: float | None = None
    """The learnt spread (millicores); ``None`` until ``min_samples`` samples came."""
    _quiet: deque[tuple[float, float]] = field(default_factory=deque)
    """``(time, millicores)`` of the samples since the last fire, within ``span``."""
    _recent: deque[tuple[float, float]] = field(default_factory=deque)
    """Every sample within ``level_span``."""

    def observe(self, t: float, non_be: float, baseline: float | None, floor: float) -> bool:
        """Record a sample; whether it is a rise of more than the noise over ``baseline`` (the
        decision's non-BE estimate; ``None``: no decision yet, nothing can fire)."""
        _trim(self._recent, t - self.level_span)
        self._recent.append((t, non_be))
        band = self.band
        rise = None if baseline is None else non_be - baseline
        if rise is not None and band is not None and rise >= max(floor, self.multiple * band):
            self._quiet.clear()
            return True
        quiet = self._quiet
        _trim(quiet, t - self.span)
        quiet.append((t, non_be))
        if len(quiet) >= self.min_samples:
            values = [v for _t, v in quiet]
            self.band = max(values) - median(values)
        return False

    def level(self, now: float) -> float | None:
        """The median of the samples of the last ``level_span`` seconds (``None`` without any)."""
        _trim(self._recent, now - self.level_span)
        return median(v for _t, v in self._recent) if self._recent else None

    def reset(self) -> None:
        self._quiet.clear()
        self._recent.clear()
        self.band = None


def _trim(samples: deque[tuple[float, float]], before: float) -> None:
    while samples and samples[0][0] < before:
        samples.popleft()
