"""The fast sampler: node and BE CPU every ~40 ms, then ``EVENT_NODE_SAMPLE``, for sub-second QoS reaction.

Layer: ``koordlet.metricsadvisor``. Each tick is one batch-reader read of two CPU counters on cached
descriptors, the root cgroup's (all tasks of the node) and the besteffort tier's; it appends
``node_cpu_usage_fast`` and ``be_cpu_usage_fast`` (cores) and publishes the event.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from koordlet import api
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.fdcache import FdCache
from koordlet.system import native, procfs
from koordlet.system.batchread import MISSING, BatchReader, FileKind, ReadResults
from koordlet.system.cgroups import CgroupMode, resource_path

log = logging.getLogger(__name__)

NAME = "FastSampler"
_FIRST_LINE_CAP = 1024
"""The aggregate ``cpu`` line is under 100 bytes; the kernel formats the rest of the file regardless."""


class Publisher(Protocol):
    """The event bus (``koordshared.runtime.eventbus.EventBus``)."""

    def publish(self, event: str) -> None: ...


MAX_WINDOW = 1.0
"""Seconds; a longer window (the agent starved or stopped) re-baselines instead of giving a rate."""
CONFIRM_RISE_FRACTION = 0.01
"""A non-BE rise of this fraction of the node's CPUs since the last window asks for a confirm window."""
DISARMED_WAKE_SECONDS = 30.0
"""A disarmed sampler's longest sleep with nothing to wake it (a safety net: ``close`` does)."""
OWN_AVERAGE_SECONDS = 1.0
"""The agent's own CPU is put back to its average over about this long (the 1 s path's view)."""


class FastSampling:
    """Who wants fast samples now: the sampler runs while anyone does (``want(owner, on)``)."""

    def __init__(self, always: bool = False) -> None:
        self._owners: set[str] = {"always"} if always else set()
        self._cond = threading.Condition()

    def want(self, owner: str, on: bool) -> None:
        with self._cond:
            before = bool(self._owners)
            if on:
                self._owners.add(owner)
            else:
                self._owners.discard(owner)
            now = bool(self._owners)
            self._cond.notify_all()
        if now != before:
            log.info("fast sampler %s (%s)", "armed" if now else "disarmed", owner)

    @property
    def armed(self) -> bool:
        with self._cond:
            return bool(self._owners)

    def wake(self) -> None:
        """Wake :meth:`wait_armed` to look at its stop Event again (the sampler's ``close``)."""
        with self._cond:
            self._cond.notify_all()

    def wait_armed(self, stop: threading.Event, poll: float = DISARMED_WAKE_SECONDS) -> bool:
        """Block while disarmed; ``False`` once ``stop`` is set (seen when :meth:`wake` or ``want``
        notifies, or after ``poll`` seconds: a timed wake-up costs ~0.1 ms of CPU on a VM, and one a
        second was a disarmed sampler's whole cost)."""
        with self._cond:
            while not self._owners and not stop.is_set():
                self._cond.wait(poll)
        return not stop.is_set()


@dataclass(frozen=True, slots=True)
class FastSamplerConfig:
    interval: float = 0.04
    """40 ms: a spike is seen at worst one interval plus the confirm window after it starts (at 50 ms the
    slow trials of `bench/reaction.py` were spikes starting just after a sample). The two slow trials
    (~670 ms) of a 50-trial run at 40 ms had noise bands of 0.40-0.45 core, while tests ran beside the
    bench; the suppress plugin's held-rise rule (``qosplugins.cpusuppress.fastrise``) now catches such
    spikes."""
    clk_tck: int = 0
    force_python: bool = False
    confirm_after: float = 0.01
    """Seconds from a window showing a non-BE rise to the confirm sample (0: no confirm windows)."""


def busy_ticks(first_line: bytes) -> int:
    """Busy ticks (user+nice+system+irq+softirq) from the aggregate ``cpu`` line of /proc/stat."""
    fields = first_line.split()
    if len(fields) < 8 or fields[0] != b"cpu":
        raise ValueError("no aggregate cpu line")
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[1:8])
    return user + nice + system + irq + softirq


class FastSampler:
    """``collect()`` takes one node + BE sample and publishes ``api.EVENT_NODE_SAMPLE``."""

    name = NAME

    def __init__(
        self,
        config: FastSamplerConfig,
        opts: fw.Options,
        *,
        bus: Publisher,
        sleep: Callable[[float], None] = time.sleep,
        arming: FastSampling | None = None,
        own_cpu: Callable[[], float] | None = None,
    ) -> None:
        host = opts.need_host(self.name)
        cache = opts.cache
        clock = opts.clock
        errors = opts.errors
        self.config = config
        self.arming = arming if arming is not None else FastSampling(always=True)
        self._own_cpu = own_cpu
        self._own_last: tuple[float, float] | None = None
        self._own_avg: float | None = None
        self._sleep = sleep
        self.interval = config.interval
        self._stat_path = str(host.paths.proc("stat"))
        self._cache = cache
        self._bus = bus
        self._clock = clock
        self._errors = errors
        self._clk_tck = config.clk_tck or procfs.clock_ticks()
        self._v2 = host.mode is CgroupMode.V2
        tier = host.qos_cgroup_dir(api.KubeQOSClass.BESTEFFORT)
        be_path = resource_path(host.paths, host.mode, "cpuacct.usage", tier, for_read=True)
        root_path = resource_path(host.paths, host.mode, "cpuacct.usage", "", for_read=True)
        kind, keys = (FileKind.KEY_VALUE, ("usage_usec",)) if self._v2 else (FileKind.COUNTER, ())
        self._be: BatchReader = native.open_batch_reader(
            [be_path, root_path], [kind, kind], [keys, keys], force_python=config.force_python
        )
        self._fds = FdCache(_FIRST_LINE_CAP)
        # ten intervals would call a 0.4 s stall of a starved agent a clock step at 40 ms
        gap_factor = max(fw.MAX_GAP_FACTOR, MAX_WINDOW / config.interval)
        self._node = fw.DeltaTracker(config.interval, max_gap_factor=gap_factor)
        self._be_delta = fw.DeltaTracker(config.interval, max_gap_factor=gap_factor)
        self._samples = 0
        self.confirms = 0
        try:
            cpus = len(host.cpu_topology())
        except (OSError, ValueError):
            cpus = 0
        self._confirm_rise = CONFIRM_RISE_FRACTION * max(cpus, 1)
        self._last_non_be: float | None = None
        self._lock = threading.Lock()
        self._closed = False

    def collect(self) -> None:
        with self._lock:
            if self._closed:
                return
            non_be = self._sample()
            last, self._last_non_be = self._last_non_be, non_be
        rose = non_be is not None and last is not None and non_be - last >= self._confirm_rise
        if not rose or self.config.confirm_after <= 0:
            return
        self._sleep(self.config.confirm_after)
        with self._lock:
            if not self._closed:
                self.confirms += 1
                self._last_non_be = self._sample()

    def run(self, stop: threading.Event, on_tick: Callable[[str, float, float], None] | None = None) -> None:
        """Sample every ``interval`` on a fixed grid while armed; sleep while nobody wants samples."""
        planned = self._clock()
        while not stop.is_set():
            if not self.arming.armed:
                if not self.arming.wait_armed(stop):
                    return
                self._rebaseline()
                planned = self._clock()
            started = self._clock()
            self.collect()
            finished = self._clock()
            if on_tick is not None:
                on_tick(NAME, finished - started, max(started - planned, 0.0))
            planned += self.interval
            if planned < finished:
                planned += (int((finished - planned) // self.interval) + 1) * self.interval
            stop.wait(max(planned - self._clock(), 0.0))

    def _rebaseline(self) -> None:
        """After a pause the old baselines are not a clock step: start afresh."""
        with self._lock:
            for tracker in (self._node, self._be_delta):
                tracker.retain(())
            self._own_last = self._own_avg = self._last_non_be = None

    def _own_cores(self, t: float) -> tuple[float, float]:
        """The agent's own cores over the window ending now, and their average over about a second
        (``own_cpu``: the process's CPU seconds; without it, nothing is put back)."""
        if self._own_cpu is None:
            return 0.0, 0.0
        cpu, last = self._own_cpu(), self._own_last
        self._own_last = (t, cpu)
        if last is None or t <= last[0]:
            return 0.0, 0.0
        window = max(cpu - last[1], 0.0) / (t - last[0])
        weight = min((t - last[0]) / OWN_AVERAGE_SECONDS, 1.0)
        avg = window if self._own_avg is None else self._own_avg + weight * (window - self._own_avg)
        self._own_avg = avg
        return window, avg

    def _sample(self) -> float | None:
        """One sample; the non-BE cores it saw (``None`` without both figures)."""
        # The agent's own CPU first, then the counters: this thread holds the GIL from one to the other,
        # so no other thread of the agent runs in between unaccounted (read after the counters, the GIL
        # taken back after the C call could wait out a sweep's switch interval, and that CPU landed in
        # this window's own share but in the next window's node counter: noise that grew with the pods).
        t = self._clock()
        own, own_avg = self._own_cores(t)
        res = self._be.read()
        node_cores = self._counter_cores(res, 1, "root", self._node, t)
        if node_cores is None and not res.ok(1):
            node_cores = self._proc_stat_cores(t)
        if node_cores is not None:
            node_cores = max(node_cores - own + own_avg, 0.0)
        be_cores = self._counter_cores(res, 0, "be", self._be_delta, t)
        fw.report_rejections(self._node, self._errors, NAME)
        fw.report_rejections(self._be_delta, self._errors, NAME)
        if node_cores is None:
            return None
        self._cache.append(api.NODE_CPU_USAGE_FAST, None, node_cores, t)
        if be_cores is not None:
            self._cache.append(api.BE_CPU_USAGE_FAST, None, be_cores, t)
        self._samples += 1
        self._bus.publish(api.EVENT_NODE_SAMPLE)
        return None if be_cores is None else node_cores - be_cores

    def _counter_cores(
        self, res: ReadResults, i: int, key: str, tracker: fw.DeltaTracker, t: float
    ) -> float | None:
        """Cores from CPU counter ``i`` of the batch (ns on v1, us on v2); ``None`` on the first reading."""
        if res.status[i] != 0:
            tracker.forget(key)
            return None
        value = res.values[i]
        if value == MISSING:
            return None
        ns = value * 1000 if self._v2 else value
        got = tracker.update(key, t, (ns,))
        return None if got is None else got[1][0] / (got[0] * 1e9)

    def _proc_stat_cores(self, t: float) -> float | None:
        try:
            raw = self._fds.read(self._stat_path, prefix=True)
        except OSError:
            raw = None
        if raw is None:
            self._errors.error(NAME, fw.ERR_READ)
            return None
        try:
            busy = busy_ticks(raw[: raw.find(b"\n")])
        except ValueError:
            self._errors.error(NAME, fw.ERR_MALFORMED)
            return None
        got = self._node.update("node", t, (busy,))
        return None if got is None else got[1][0] / (got[0] * self._clk_tck)

    def has_synced(self) -> bool:
        """A first sample taken, or nothing asked for yet (a disarmed sampler has nothing to sync)."""
        return self._samples > 0 or not self.arming.armed

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._fds.close()
            self._be.close()
        self.arming.wake()  # a disarmed run() sees its stop now
