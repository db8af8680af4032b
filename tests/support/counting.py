"""A call counter put in place of a function for one test: the work a change saves is counted in calls, not
timed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest


@dataclass
class Calls:
    n: int = 0


def count_calls(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> Calls:
    """Count the calls of ``owner.name`` (a module's function or a class's method) until the test ends."""
    original = getattr(owner, name)
    calls = Calls()

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.n += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


class _CountedSeries(dict[Any, Any]):
    """A metric cache kind's series by key, counting the lookups by key into ``calls``."""

    calls: Calls

    def get(self, key: Any, default: Any = None) -> Any:
        self.calls.n += 1
        return super().get(key, default)


def count_series_lookups(cache: Any) -> Calls:
    """Count a metric cache's lookups of a series by its key, in every kind it has now."""
    calls = Calls()
    for kind in cache._kinds.values():
        counted = _CountedSeries(kind.series)
        counted.calls = calls
        kind.series = counted
    return calls
