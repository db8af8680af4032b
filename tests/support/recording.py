"""Recording fakes at the agent's internal boundaries: collector error sink, event bus, process source.

(The fakes of the plugin contract's services are public, in ``koordlet.testing``.)
"""

from __future__ import annotations

import collections
from collections.abc import Sequence

from koordlet.metricsadvisor.hostapp import ProcSample


class RecordingErrors:
    """``ErrorSink`` that counts by (collector, kind)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()

    def error(self, collector: str, kind: str, n: int = 1) -> None:
        self.counts[(collector, kind)] += n

    def kind(self, kind: str) -> int:
        return sum(n for (_, k), n in self.counts.items() if k == kind)


class RecordingBus:
    def __init__(self) -> None:
        self.events: list[str] = []

    def publish(self, event: str) -> None:
        self.events.append(event)


class FakeProcesses:
    """``ProcessSource`` returning whatever the test put in ``procs``."""

    def __init__(self) -> None:
        self.procs: list[ProcSample] = []

    def by_name(self, names: frozenset[str]) -> Sequence[ProcSample]:
        return [p for p in self.procs if p.name in names]
