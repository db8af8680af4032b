"""CPI per container: cycles and instructions over a window (koordlet's PerformanceCollector, CPI part).

Layer: ``koordlet.metricsadvisor``. Every ``--cpi-collector-interval`` (60 s) each running container is
counted for ``--collect-cpi-timewindow`` (10 s) through ``perf_event_open`` in cgroup mode on every online
CPU (``koordlet.system.perf``; the syscalls are the C helper's), and ``container_cpi{pod_uid,
container_id, cpi_resource=cycle|instruction}`` holds the counts. The window is not slept through: the
collector runs every window and alternates between opening (and enabling) the counters and reading and
closing them, so a stop never waits for a window. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from koordlet.api.errors import CgroupGone, ResourceUnsupported, UnsafePath
from koordlet.api.metrics import CONTAINER_CPI
from koordlet.metriccache import SeriesKey
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.targets import CONTAINER, targets_of
from koordlet.system import perf
from koordlet.system.topology import read_online_cpus

log = logging.getLogger(__name__)

NAME = "CPICollector"
# perf event name -> koordlet's cpi_resource label
_LABELS = (("cycles", "cycle"), ("instructions", "instruction"))


class Counters(Protocol):
    """What :class:`CPICollector` needs of ``perf.CgroupCounters`` (a fake in unit tests)."""

    def start(self) -> None: ...

    def read(self) -> perf.PerfSample: ...

    def close(self) -> None: ...


CounterFactory = Callable[[Path, Sequence[int], Sequence[str]], Counters]


@dataclass(frozen=True, slots=True)
class CPIConfig:
    interval: float = 60.0
    """``--cpi-collector-interval``: how often containers are measured."""
    window: float = 10.0
    """``--collect-cpi-timewindow``: how long each measurement counts."""


@dataclass(slots=True)
class _Open:
    pod_uid: str
    container_id: str
    counters: Counters


class CPICollector:
    """``collect()`` opens the counters of every running container, or reads and closes them."""

    name = NAME

    def __init__(
        self,
        config: CPIConfig,
        opts: fw.Options,
        *,
        counters: CounterFactory = perf.CgroupCounters,
        check: Callable[[], None] | None = None,
    ) -> None:
        host = opts.need_host(self.name)
        cache = opts.cache
        states = opts.need_states(self.name)
        clock = opts.clock
        errors = opts.errors
        self.config = config
        self.interval = config.window
        self._host = host
        self._cache = cache
        self._states = states
        self._clock = clock
        self._errors = errors
        self._counters = counters
        self._check = check or (lambda: perf.check_events(host.paths, perf.CPI_EVENTS))
        self._open: list[_Open] = []
        self._last = float("-inf")
        self._swept = False
        self.unsupported: str | None = None
        """Why CPI cannot be collected here (set by the first sweep), ``None`` while it can."""

    def collect(self) -> None:
        if not self._swept:
            self._swept = True
            try:
                self._check()
            except ResourceUnsupported as err:
                self.unsupported = str(err)
                log.info("CPI collection skipped: %s", err)
        if self.unsupported is not None:
            return
        if self._open:
            self._read_and_close()
        elif self._clock() - self._last >= self.config.interval - self.config.window:
            self._open_all()

    def _open_all(self) -> None:
        self._last = self._clock()
        cpus = sorted(read_online_cpus(self._host.paths))
        targets, unsafe = targets_of(self._host, self._states.pods(), collect_containers=True)
        if unsafe:
            self._errors.error(NAME, fw.ERR_UNSAFE_PATH, unsafe)
        for t in targets:
            if t.kind != CONTAINER:
                continue
            try:
                path = perf.perf_cgroup_dir(self._host.paths, self._host.mode, t.cgroup_dir)
                c = self._counters(path, cpus, perf.CPI_EVENTS)
            except CgroupGone:
                self._errors.error(NAME, fw.ERR_GONE)
                continue
            except UnsafePath:
                self._errors.error(NAME, fw.ERR_UNSAFE_PATH)
                continue
            except (ResourceUnsupported, OSError) as err:
                self._errors.error(NAME, fw.ERR_READ)
                log.debug("cannot count %s: %s", t.cgroup_dir, err)
                continue
            try:
                c.start()
            except OSError:
                c.close()
                self._errors.error(NAME, fw.ERR_READ)
                continue
            self._open.append(_Open(t.pod_uid, t.ident, c))

    def _read_and_close(self) -> None:
        t = self._clock()
        out: list[tuple[SeriesKey, float]] = []
        opened, self._open = self._open, []
        for o in opened:
            try:
                sample = o.counters.read()
            except OSError:
                self._errors.error(NAME, fw.ERR_READ)
                continue
            finally:
                o.counters.close()
            if sample.time_running_ns == 0:
                continue  # never scheduled on a counter (the container did not run): no figure
            for event, label in _LABELS:
                key = (("container_id", o.container_id), ("cpi_resource", label), ("pod_uid", o.pod_uid))
                out.append((key, sample.values.get(event, 0.0)))
        if out:
            self._cache.append_batch(CONTAINER_CPI, out, t)

    def has_synced(self) -> bool:
        return self._swept

    def close(self) -> None:
        opened, self._open = self._open, []
        for o in opened:
            o.counters.close()
