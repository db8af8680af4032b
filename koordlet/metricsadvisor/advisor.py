"""``MetricsAdvisor``: builds the collectors, schedules them, exports usage, drops series of gone pods.

Layer: ``koordlet.metricsadvisor`` (koordlet's ``metricsadvisor.MetricAdvisor``). ``start`` schedules each
enabled collector's ``collect`` on the supervisor (collectors of one interval share a thread; the 40 ms
fast sampler has its own, so it never waits behind a 1000-pod sweep) and returns at once; ``has_synced``
turns true when every enabled collector has produced its first samples; ``shutdown`` closes every cached
descriptor.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.beresource import BEResourceCollector, BEResourceConfig
from koordlet.metricsadvisor.config import AdvisorConfig
from koordlet.metricsadvisor.cpi import CPICollector, CPIConfig
from koordlet.metricsadvisor.exporter import AdvisorMetrics, UsageExporter
from koordlet.metricsadvisor.exposition import Exposition
from koordlet.metricsadvisor.fastsampler import FastSampler, FastSamplerConfig, FastSampling, Publisher
from koordlet.metricsadvisor.hostapp import HostAppConfig, HostApplicationCollector, ProcessSource
from koordlet.metricsadvisor.noderesource import NodeResourceCollector, NodeResourceConfig
from koordlet.metricsadvisor.podresource import PodResourceCollector, PodResourceConfig
from koordlet.metricsadvisor.psi import PSICollector, PSIConfig
from koordlet.metricsadvisor.qosexport import NodeQoSExporter
from koordlet.metricsadvisor.resctrlcollector import ResctrlCollector, ResctrlCollectorConfig
from koordlet.metricsadvisor.summary import ResourceSummaryExporter
from koordlet.metricsadvisor.sysresource import SystemResourceCollector, SystemResourceConfig
from koordlet.system.host import Host
from koordlet.system.paths import HostPaths
from koordshared.runtime.lifecycle import Supervisor, Tick

log = logging.getLogger(__name__)

__all__ = ["AdvisorConfig", "MetricsAdvisor"]

GC_NAME = "metricsadvisor/gc"
EXPOSITION_NAME = "metricsadvisor/exposition"


class MetricsAdvisor:
    """The metrics advisor component (``start``/``has_synced``/``shutdown``, as the daemon expects)."""

    name = "metricsadvisor"

    def __init__(
        self,
        config: AdvisorConfig,
        host: Host,
        cache: MetricCache,
        states: api.StatesReader,
        bus: Publisher,
        registry: CollectorRegistry | None,
        clock: Callable[[], float] = time.monotonic,
        *,
        paths: HostPaths | None = None,
        processes: ProcessSource | None = None,
        fast_sampling: FastSampling | None = None,
    ) -> None:
        if paths is None:
            paths = host.paths
        elif host.paths != paths:
            raise ValueError("host and paths disagree: build the Host from the same HostPaths")
        self.config = config
        self.cache = cache
        self.states = states
        self._clock = clock
        self.metrics = AdvisorMetrics(registry) if registry is not None else None
        errors: fw.ErrorSink = self.metrics if self.metrics is not None else fw.NullErrors()
        self.shared = fw.SharedState()
        opts = fw.Options(cache, clock, errors, host=host, states=states, shared=self.shared)
        every = config.collect_interval
        cached = config.page_cache
        self.node = NodeResourceCollector(NodeResourceConfig(every, with_page_cache=cached), opts)
        self.pods = PodResourceCollector(
            PodResourceConfig(every, config.collect_containers, config.force_python_reader, cached), opts
        )
        self.system = SystemResourceCollector(
            SystemResourceConfig(every, config.sys_metric_outdated_interval),
            opts,
            host_apps_enabled=config.host_app_interval > 0,
        )
        self.collectors: list[fw.Collector] = [self.node, self.pods, self.system]
        self.be: BEResourceCollector | None = None
        if config.be_interval > 0:
            self.be = BEResourceCollector(BEResourceConfig(config.be_interval), opts)
            self.collectors.append(self.be)
        self.host_apps: HostApplicationCollector | None = None
        if config.host_app_interval > 0:
            self.host_apps = HostApplicationCollector(
                HostAppConfig(config.host_app_interval),
                opts,
                processes=processes,
            )
            self.collectors.append(self.host_apps)
        self.psi: PSICollector | None = None
        if config.psi_interval > 0:
            self.psi = PSICollector(PSIConfig(config.psi_interval), opts)
            self.collectors.append(self.psi)
        self.cpi: CPICollector | None = None
        if config.cpi_enabled:
            self.cpi = CPICollector(CPIConfig(config.cpi_interval, config.cpi_window), opts)
            self.collectors.append(self.cpi)
        self.resctrl: ResctrlCollector | None = None
        if config.resctrl_enabled:
            self.resctrl = ResctrlCollector(ResctrlCollectorConfig(config.resctrl_interval), opts)
            self.collectors.append(self.resctrl)
        self.fast: FastSampler | None = None
        if config.fast_sample_interval > 0:
            self.fast = FastSampler(
                FastSamplerConfig(config.fast_sample_interval, force_python=config.force_python_reader),
                opts,
                bus=bus,
                arming=fast_sampling,
                own_cpu=time.process_time if clock is time.monotonic and config.fast_sample_own_cpu else None,
            )
            self.collectors.append(self.fast)
        if registry is not None:
            # a sample is exported while younger than three of its collector's intervals (at least 30 s)
            max_age = max(30.0, 3.0 * max(c.interval for c in self.collectors))
            registry.register(UsageExporter(cache, states, config.node_name, clock, max_age=max_age))
            registry.register(NodeQoSExporter(cache, states, config.node_name, clock, max_age=max_age))
            registry.register(ResourceSummaryExporter(states, config.node_name))
        self.exposition: Exposition | None = None
        """``/metrics`` rendered after a pod sweep (the bulk of the series) when a scrape is due, served as
        bytes."""
        if registry is not None:
            self.exposition = Exposition(
                registry,
                interval=every,
                max_staleness=max(10.0, 5.0 * every),
                clock=clock,
                on_error=lambda err: errors.error("exposition", f"exception:{type(err).__name__}"),
            )
        self._lock = threading.Lock()
        self._closed = False

    def start(self, stop: threading.Event, supervisor: Supervisor) -> None:
        """Schedule every enabled collector and the GC; returns at once."""
        by_interval: dict[float, list[Tick]] = {}
        for collector in self.collectors:
            if collector is self.fast:
                run = functools.partial(self.fast.run, stop, self._on_tick(collector.name))
                supervisor.go(f"{self.name}/{collector.name}", run)
                continue
            name = collector.name
            tick = Tick(
                name, self._cpu_timed(name, collector.collect), self._on_error(name), self._on_tick(name)
            )
            by_interval.setdefault(collector.interval, []).append(tick)
        # Collectors of one interval share a thread, in dependency order (one wake-up a second
        # instead of one per collector; each costs ~0.1 ms of CPU on a VM).
        for interval, ticks in by_interval.items():
            names = "+".join(t.name.removesuffix("Collector") for t in ticks)
            supervisor.every_all(f"{self.name}/{names}", interval, ticks)
        if self.exposition is not None:
            exposition = self.exposition
            supervisor.go(EXPOSITION_NAME, lambda: exposition.run(stop))
        supervisor.every(
            GC_NAME,
            self.config.gc_interval,
            self._gc_tick,
            on_error=self._on_error("gc"),
        )
        log.info("metrics advisor started with %s", ", ".join(c.name for c in self.collectors))

    def _cpu_timed(self, name: str, collect: Callable[[], None]) -> Callable[[], None]:
        """``collect`` counting its thread's CPU time (``koordlet_collect_cpu_seconds_total``): the wall
        time of a sweep also holds waits for the GIL and the CPU, which a busy node makes long."""
        if self.metrics is None:
            return collect
        counter = self.metrics.cpu.labels(collector=name)

        def timed() -> None:
            before = time.thread_time()
            try:
                collect()
            finally:
                counter.inc(time.thread_time() - before)

        return timed

    def _on_error(self, name: str) -> Callable[[str, BaseException], None]:
        def hook(_thread: str, err: BaseException) -> None:
            if self.metrics is not None:
                self.metrics.on_error(name, err)

        return hook

    def _on_tick(self, name: str) -> Callable[[str, float, float], None] | None:
        # The pod sweep's tick tells the exposition to render: the sweep writes the bulk of the series.
        exposition = self.exposition if name == self.pods.name else None
        if self.metrics is None and exposition is None:
            return None
        # The labelled children once per collector, not per tick: the 40 ms fast sampler ticks 25 times
        # a second and two ``labels()`` lookups were about a third of what a tick costs it.
        metrics = self.metrics
        duration = metrics.duration.labels(collector=name) if metrics is not None else None
        lateness = metrics.lateness.labels(collector=name) if metrics is not None else None

        def hook(_thread: str, took: float, late: float) -> None:
            if duration is not None and lateness is not None:
                duration.observe(took)
                lateness.observe(late)
            if exposition is not None:
                exposition.collected()

        return hook

    def collect_once(self) -> None:
        """One sweep of every collector in dependency order (tests, benchmarks, first sync)."""
        for collector in self.collectors:
            started = self._clock()
            collector.collect()
            if self.metrics is not None:
                self.metrics.on_tick(collector.name, self._clock() - started, 0.0)

    def _gc_tick(self) -> None:
        self.gc()

    def gc(self) -> int:
        """Drop every series of pods, containers and host applications that are gone; returns how many.

        Each ``drop_where`` holds the cache lock for one pass over the series, and the lock is released
        between calls, so even a node drain (a thousand pods at once) never stalls a sweep for long.
        """
        pods = self.states.pods()
        live = {
            "pod_uid": {p.uid for p in pods},
            "container_id": {c.container_id for p in pods for c in p.containers if c.container_id},
            "host_app_name": {a.name for a in self.states.node_slo().host_applications},
        }
        gone: dict[str, set[str]] = {label: set() for label in live}
        for metric in self.cache.metrics():
            for labels in self.cache.series(metric):
                for label, keep in live.items():
                    value = labels.get(label)
                    if value is not None and value not in keep:
                        gone[label].add(value)
        dropped = 0
        for label, values in gone.items():
            for value in values:
                dropped += self.cache.drop_where(label, value)
        if dropped:
            log.debug("dropped %d series: %s", dropped, {k: len(v) for k, v in gone.items()})
        return dropped

    def has_synced(self) -> bool:
        return all(c.has_synced() for c in self.collectors)

    def shutdown(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self.exposition is not None:
            self.exposition.close()
        for collector in self.collectors:
            collector.close()
