"""The agent's own Prometheus metrics (health of the agent itself), and the registry plugins export through.

Usage metrics of the node and its pods are built by the metrics advisor's collector (rendered once per pod
sweep with the rest of the registry by its ``Exposition``, which serves ``/metrics``); this
module holds what the agent says about itself: start time, build info, plugin states, tick errors,
tick duration and lateness. :class:`PluginMetrics` is ``api.MetricRegistry`` on the same registry. Never
the global default registry, so tests get a fresh one each.
"""

from __future__ import annotations

import contextlib
import os
import platform
import resource
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from koordlet import metricdefs
from koordshared import __version__

LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class AgentMetrics:
    """Metric objects of the agent, created once per registry."""

    def __init__(self, registry: CollectorRegistry, node: str) -> None:
        self.registry = registry
        self.node = node
        self.start_time = metricdefs.gauge(metricdefs.START_TIME, registry)
        self.build_info = Gauge(
            metricdefs.BUILD_INFO.name,
            metricdefs.BUILD_INFO.help,
            ["version", "python", "native"],
            registry=registry,
        )
        self.plugin_state = Gauge(
            metricdefs.PLUGIN_STATE.name,
            metricdefs.PLUGIN_STATE.help,
            ["plugin", "source", "state"],
            registry=registry,
        )
        self.tick_errors = Counter(
            metricdefs.TICK_ERRORS.name,
            metricdefs.TICK_ERRORS.help,
            ["component", "kind"],
            registry=registry,
        )
        self.tick_duration = Histogram(
            metricdefs.TICK_DURATION_SECONDS.name,
            metricdefs.TICK_DURATION_SECONDS.help,
            ["component"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.tick_lateness = Histogram(
            metricdefs.TICK_LATENESS_SECONDS.name,
            metricdefs.TICK_LATENESS_SECONDS.help,
            ["component"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )

    def started(self, native: bool) -> None:
        self.start_time.labels(node=self.node).set(time.time())
        self.build_info.labels(
            version=__version__, python=platform.python_version(), native=str(native).lower()
        ).set(1)

    def set_plugin_state(self, plugin: str, source: str, state: str) -> None:
        for candidate in ("disabled", "running", "failed", "stopped"):
            self.plugin_state.labels(plugin=plugin, source=source, state=candidate).set(
                1.0 if candidate == state else 0.0
            )

    def tick_error(self, component: str, err: BaseException) -> None:
        self.tick_errors.labels(component=component, kind=type(err).__name__).inc()

    def tick_timing(self, component: str, duration: float, lateness: float) -> None:
        self.tick_duration.labels(component=component).observe(duration)
        self.tick_lateness.labels(component=component).observe(lateness)


class PluginMetrics:
    """``api.MetricRegistry``: plugins' gauges on the agent's registry, one object per name.

    A plugin set up again on the same registry (tests, an embedding that restarts plugins) gets the gauge it
    made before; a name that another metric holds, or the same name with other labels, is a ``ValueError``.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._lock = threading.Lock()
        self._gauges: dict[str, tuple[tuple[str, ...], Gauge]] = {}

    def gauge(self, name: str, documentation: str, labels: Sequence[str]) -> Gauge:
        with self._lock:
            known = self._gauges.get(name)
            if known is not None:
                if known[0] != tuple(labels):
                    raise ValueError(f"gauge {name} already made with labels {list(known[0])}")
                return known[1]
            gauge = Gauge(name, documentation, list(labels), registry=self.registry)
            self._gauges[name] = (tuple(labels), gauge)
            return gauge


FD_RECOUNT_SECONDS = 30.0
"""How old the open-descriptor count may get: counting lists ``/proc/self/fd`` (6500 entries at 1000
pods: the metric cache's and collectors' cached descriptors)."""


class ProcessMetrics(Collector):
    """``process_*`` as prometheus_client's ``ProcessCollector`` (and Go's koordlet) export them, at less
    cost per render: ``/proc/self/stat`` is read each time (one small file), the descriptor limit comes
    from ``getrlimit``, the boot time is read once and the open descriptors are recounted at most every
    :data:`FD_RECOUNT_SECONDS`."""

    def __init__(self, registry: CollectorRegistry, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._ticks = os.sysconf("SC_CLK_TCK")
        self._page = resource.getpagesize()
        self._btime = 0.0
        with contextlib.suppress(OSError, ValueError), open("/proc/stat", "rb") as stat:
            self._btime = next(float(line.split()[1]) for line in stat if line.startswith(b"btime "))
        self._fds: tuple[float, int] | None = None
        registry.register(self)

    def _open_fds(self) -> int:
        now = self._clock()
        if self._fds is None or now - self._fds[0] >= FD_RECOUNT_SECONDS:
            self._fds = (now, len(os.listdir("/proc/self/fd")))
        return self._fds[1]

    def collect(self) -> Iterator[Metric]:
        try:
            with open("/proc/self/stat", "rb") as f:
                parts = f.read().rsplit(b")", 1)[-1].split()
            fds = self._open_fds()
        except OSError:
            return
        yield GaugeMetricFamily(
            "process_virtual_memory_bytes", "Virtual memory size in bytes.", float(parts[20])
        )
        yield GaugeMetricFamily(
            "process_resident_memory_bytes", "Resident memory size in bytes.", float(parts[21]) * self._page
        )
        yield GaugeMetricFamily(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            float(parts[19]) / self._ticks + self._btime,
        )
        yield CounterMetricFamily(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
            (float(parts[11]) + float(parts[12])) / self._ticks,
        )
        yield GaugeMetricFamily("process_open_fds", "Number of open file descriptors.", fds)
        yield GaugeMetricFamily(
            "process_max_fds",
            "Maximum number of open file descriptors.",
            resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        )
