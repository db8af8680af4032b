"""Node usage: CPU cores from ``/proc/stat`` deltas and memory from ``/proc/meminfo`` (NodeResourceCollector).

Layer: ``koordlet.metricsadvisor``. CPU is koordlet's busy time (user+nice+system+irq+softirq; idle, iowait
and steal excluded) in USER_HZ ticks: ``cores = delta_busy / (dt x CLK_TCK)``; the first round only sets
the baseline. Memory is ``MemTotal - MemAvailable`` in bytes. Both are also published to the shared
state for the system collector. With page-cache collection on (koordlet's PageCacheCollector, from the
same read) ``node_memory_usage_with_page_cache`` is ``MemTotal - MemFree``.
"""

from __future__ import annotations

from dataclasses import dataclass

from koordlet import api
from koordlet.api.metrics import NODE_MEMORY_USAGE_WITH_PAGE_CACHE
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.fdcache import FdCache
from koordlet.system import procfs
from koordshared.runtime.errors import InvalidValue

NAME = "NodeResourceCollector"
PROC_STAT_CAP = 1 << 20


@dataclass(frozen=True, slots=True)
class NodeResourceConfig:
    interval: float = 1.0
    clk_tck: int = 0
    """USER_HZ; 0 asks the OS (100 on every mainstream build)."""
    with_page_cache: bool = False
    """Also ``node_memory_usage_with_page_cache`` (``--enable-pagecache-collector``)."""


class NodeResourceCollector:
    """``collect()`` appends ``node_cpu_usage`` (cores) and ``node_memory_usage`` (bytes)."""

    name = NAME

    def __init__(self, config: NodeResourceConfig, opts: fw.Options) -> None:
        paths = opts.need_paths(self.name)
        cache = opts.cache
        shared = opts.shared
        clock = opts.clock
        errors = opts.errors
        self.config = config
        self.interval = config.interval
        self._stat_path = paths.proc("stat")
        self._meminfo_path = paths.proc("meminfo")
        self._cache = cache
        self._shared = shared
        self._clock = clock
        self._errors = errors
        self._clk_tck = config.clk_tck or procfs.clock_ticks()
        # /proc/stat grows with CPUs and interrupt lines (the "intr" line lists every IRQ): leave room
        self._fds = FdCache(cap=PROC_STAT_CAP)
        self._cpu = fw.DeltaTracker(config.interval)
        self._synced = False

    def collect(self) -> None:
        stat_raw = self._read(self._stat_path)
        mem_raw = self._read(self._meminfo_path)
        t = self._clock()
        emitted = False
        if stat_raw is not None:
            emitted |= self._collect_cpu(stat_raw, t)
        if mem_raw is not None:
            try:
                info = procfs.parse_meminfo(mem_raw.decode(errors="replace"))
            except InvalidValue:
                self._errors.error(NAME, fw.ERR_MALFORMED)
            else:
                used = info.used
                self._cache.append(api.NODE_MEMORY_USAGE, None, float(used), t)
                if self.config.with_page_cache:
                    with_cache = float(info.used_with_page_cache)
                    self._cache.append(NODE_MEMORY_USAGE_WITH_PAGE_CACHE, None, with_cache, t)
                self._shared.set(fw.NODE_MEMORY, t, float(used))
                emitted = True
        fw.report_rejections(self._cpu, self._errors, NAME)
        self._synced |= emitted and self._shared.get(fw.NODE_CPU) is not None

    def _collect_cpu(self, raw: bytes, t: float) -> bool:
        try:
            stat = procfs.parse_proc_stat(raw.decode(errors="replace"))
        except InvalidValue:
            self._errors.error(NAME, fw.ERR_MALFORMED)
            return False
        ncpu = len(stat.per_cpu)
        if ncpu:
            self._shared.set(fw.CPU_COUNT, t, float(ncpu))
        got = self._cpu.update("node", t, (stat.total.busy,))
        if got is None:
            return False
        dt, (dbusy,) = got
        cores = dbusy / (dt * self._clk_tck)
        if ncpu and cores > ncpu * fw.CAPACITY_SLACK:
            self._errors.error(NAME, fw.ERR_OVER_CAPACITY)
            return False
        self._cache.append(api.NODE_CPU_USAGE, None, cores, t)
        self._shared.set(fw.NODE_CPU, t, cores)
        return True

    def _read(self, path: object) -> bytes | None:
        try:
            data = self._fds.read(str(path))
        except OSError:
            self._errors.error(NAME, fw.ERR_READ)
            return None
        if data is None:
            self._errors.error(NAME, fw.ERR_READ)
        return data

    def has_synced(self) -> bool:
        return self._synced

    def close(self) -> None:
        self._fds.close()
