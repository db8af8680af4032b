"""The fast sampler: node and BE CPU every ~50 ms, then ``EVENT_NODE_SAMPLE``, for sub-second QoS reaction.

Layer: ``koordlet.metricsadvisor``. Each tick is one batch-reader read of two CPU counters on cached
descriptors, the root cgroup's (all tasks of the node) and the besteffort tier's; it appends
``node_cpu_usage_fast`` and ``be_cpu_usage_fast`` (cores) and publishes the event.

Why the root cgroup and not ``/proc/stat``: ``/proc/stat`` counts USER_HZ ticks (CLK_TCK = 100, 10 ms)
per CPU, charged to whatever ran when the tick fired, so over a 100 ms window the node figure moves in
0.1-core steps and a steady load reads x +- ~0.1 x ncpu from window to window. Subtracting an exact BE
counter from that would make "non-BE usage" jump by ~100m on noise alone, and the suppress plugin shrinks
BE on a 1 % rise. The root ``cpuacct.usage`` (ns; v2 ``cpu.stat usage_usec``) is exact, so a 100 ms window
tells the truth; it leaves out irq/softirq time, which the 1 s ``node_cpu_usage`` keeps (koordlet's
definition). When the root counter cannot be read the sampler falls back to the first line of
``/proc/stat`` with the tick quantisation above. Cost: about 20 x 20 us of reads per second.

A confirm window. A load that starts inside a window shows only as part of its rate there (a core that
starts 10 ms before the sample reads as 0.2 core over 50 ms), so the first reaction to a spike can be far
too small and the full one would wait a whole interval. When non-BE usage (node - BE) rose by 1 % of the
node since the previous window, the sampler takes a second sample ``confirm_after`` (10 ms) later: that
window lies entirely after the rise and reads its true rate. Worst-case detection is thus one interval
plus the confirm window, instead of two intervals.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.fdcache import FdCache
from koordlet.system import native, procfs
from koordlet.system.batchread import MISSING, BatchReader, FileKind, ReadResults
from koordlet.system.cgroups import CgroupMode, resource_path
from koordlet.system.host import Host

NAME = "FastSampler"
_FIRST_LINE_CAP = 1024
"""The aggregate ``cpu`` line is under 100 bytes; the kernel formats the rest of the file regardless."""


class Publisher(Protocol):
    """The event bus (``koord.runtime.eventbus.EventBus``)."""

    def publish(self, event: str) -> None: ...


MAX_WINDOW = 1.0
"""Seconds; a longer window (the agent starved or stopped) re-baselines instead of giving a rate."""
CONFIRM_RISE_FRACTION = 0.01
"""A non-BE rise of this fraction of the node's CPUs since the last window asks for a confirm window."""


@dataclass(frozen=True, slots=True)
class FastSamplerConfig:
    interval: float = 0.05
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
        host: Host,
        cache: MetricCache,
        bus: Publisher,
        clock: fw.Clock,
        errors: fw.ErrorSink,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
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
        # ten intervals would call a 0.5 s stall of a starved agent a clock step at 50 ms
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

    def _sample(self) -> float | None:
        """One sample; the non-BE cores it saw (``None`` without both figures)."""
        res = self._be.read()
        t = self._clock()
        node_cores = self._counter_cores(res, 1, "root", self._node, t)
        if node_cores is None and not res.ok(1):
            node_cores = self._proc_stat_cores(t)
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
        return self._samples > 0

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._fds.close()
            self._be.close()
