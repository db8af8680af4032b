"""What every collector shares: the collector Protocol, error sink, counter-delta tracking, shared state.

Layer: ``koordlet.metricsadvisor``. Rates are computed from cumulative kernel counters with the rules of
``docs/reliability.md`` (F2, F13): the first reading only sets a baseline (koordlet's first-round skip), a
counter that goes backwards is discarded and re-baselined, and a time step ``dt <= 0`` or ``dt > 10 x
interval`` (clock jump, VM pause, stalled agent) re-baselines instead of producing a rate.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.system.host import Host
from koordlet.system.paths import HostPaths

Clock = Callable[[], float]

MAX_GAP_FACTOR = 10.0
"""A baseline older than this many intervals is stale: re-baseline rather than average over the gap."""
CAPACITY_SLACK = 1.1
"""A CPU rate may exceed the CPU count by timing jitter between the read and the clock; beyond 10 % it
is a counter artefact (reset to a higher value, recreated cgroup) and is discarded."""

# Error kinds counted in ``koordlet_collect_errors_total{collector,kind}``.
ERR_GONE = "cgroup_gone"
ERR_FILE_MISSING = "file_missing"
"""The cgroup is there but one of its files is not (v2 without that controller, v1 mid-teardown)."""
ERR_MALFORMED = "malformed"
ERR_READ = "read_error"
ERR_COUNTER_RESET = "counter_reset"
ERR_CLOCK = "clock_step"
ERR_OVER_CAPACITY = "over_capacity"
ERR_UNSAFE_PATH = "unsafe_path"


class ErrorSink(Protocol):
    """Counts collection problems by collector and kind (the Prometheus counter in production)."""

    def error(self, collector: str, kind: str, n: int = 1) -> None: ...


class NullErrors:
    """An :class:`ErrorSink` that drops everything (embedding without metrics)."""

    def error(self, collector: str, kind: str, n: int = 1) -> None:
        return None


class Collector(Protocol):
    """One collector: ``collect()`` is the unit of work the advisor schedules and tests call directly."""

    name: str
    interval: float

    def collect(self) -> None: ...

    def has_synced(self) -> bool:
        """True once a sweep has produced samples (after the baseline round for rate collectors)."""
        ...

    def close(self) -> None:
        """Release cached descriptors."""
        ...


class DeltaTracker:
    """Deltas of cumulative counters per key with reset and clock-step rejection.

    ``update`` returns ``(dt, deltas)`` or ``None`` (first reading, reset, or bad time step); each rejection
    re-baselines on the current reading and is tallied in ``resets``/``clock_steps`` for the caller to
    report. Values are tuples so one key can carry several counters read together (nr_periods and
    nr_throttled): a reset of any of them rejects all.
    """

    __slots__ = ("_base", "clock_steps", "max_gap", "resets")

    def __init__(self, interval: float, *, max_gap_factor: float = MAX_GAP_FACTOR) -> None:
        self.max_gap = interval * max_gap_factor
        self._base: dict[Hashable, tuple[float, tuple[int, ...]]] = {}
        self.resets = 0
        self.clock_steps = 0

    def update(
        self, key: Hashable, t: float, values: tuple[int, ...]
    ) -> tuple[float, tuple[int, ...]] | None:
        prev = self._base.get(key)
        self._base[key] = (t, values)
        if prev is None:
            return None
        t0, v0 = prev
        dt = t - t0
        if not 0.0 < dt <= self.max_gap:
            self.clock_steps += 1
            return None
        deltas = tuple(v - p for v, p in zip(values, v0, strict=True))
        if any(d < 0 for d in deltas):
            self.resets += 1
            return None
        return dt, deltas

    def forget(self, key: Hashable) -> None:
        self._base.pop(key, None)

    def retain(self, keys: Iterable[Hashable]) -> None:
        """Drop the baselines of every key not in ``keys`` (pods that went away)."""
        keep = set(keys)
        for key in [k for k in self._base if k not in keep]:
            del self._base[key]

    def take_rejections(self) -> tuple[int, int]:
        """``(resets, clock_steps)`` since the last call, then zero them."""
        out = (self.resets, self.clock_steps)
        self.resets = self.clock_steps = 0
        return out

    def __len__(self) -> int:
        return len(self._base)


def report_rejections(tracker: DeltaTracker, errors: ErrorSink, collector: str) -> None:
    resets, steps = tracker.take_rejections()
    if resets:
        errors.error(collector, ERR_COUNTER_RESET, resets)
    if steps:
        errors.error(collector, ERR_CLOCK, steps)


@dataclass(frozen=True, slots=True)
class Stamped:
    """A value and the monotonic time it was measured."""

    t: float
    value: float


class SharedState:
    """Latest node, pod-sum and host-application usage shared among collectors (koordlet's SharedState).

    The system collector subtracts the others' figures only when every one of them is fresh.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, Stamped] = {}

    def set(self, name: str, t: float, value: float) -> None:
        with self._lock:
            self._values[name] = Stamped(t, value)

    def get(self, name: str) -> Stamped | None:
        with self._lock:
            return self._values.get(name)

    def clear(self, name: str) -> None:
        with self._lock:
            self._values.pop(name, None)


# SharedState keys.
NODE_CPU = "node_cpu"
NODE_MEMORY = "node_memory"
PODS_CPU = "pods_cpu"
PODS_MEMORY = "pods_memory"
HOST_APPS_CPU = "host_apps_cpu"
HOST_APPS_MEMORY = "host_apps_memory"
CPU_COUNT = "cpu_count"


@dataclass(frozen=True, slots=True)
class Options:
    """What the collectors stand on, handed to each as one value (Koordinator's ``framework.Options``):
    every collector is built as ``Collector(config, opts)``, plus keyword-only extras of its own."""

    cache: MetricCache
    clock: Clock
    errors: ErrorSink
    host: Host | None = None
    """The cgroup host (its ``paths`` serve collectors that read only /proc and /sys)."""
    paths: HostPaths | None = None
    """When there is no :attr:`host`: the paths of a collector that reads no cgroup."""
    states: api.StatesReader | None = None
    shared: SharedState = field(default_factory=SharedState)

    def need_host(self, who: str) -> Host:
        if self.host is None:
            raise ValueError(f"{who} needs Options.host")
        return self.host

    def need_paths(self, who: str) -> HostPaths:
        if self.paths is not None:
            return self.paths
        return self.need_host(who).paths

    def need_states(self, who: str) -> api.StatesReader:
        if self.states is None:
            raise ValueError(f"{who} needs Options.states")
        return self.states
