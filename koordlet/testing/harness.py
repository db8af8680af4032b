"""The plugin test harness: every fake wired into the ``PluginContext`` a plugin's ``setup`` receives.

``make_harness()`` gives a v1 (or v2) host with the three kubepods tiers, a node, an empty NodeSLO, a fake
clock and a fresh Prometheus registry; ``h.start(plugin)`` declares its flags, sets it up and runs it
(``ctx.every`` only records the schedule), and the test then calls the plugin's unit of work directly or
``h.tick()``, with no threads and no sleeps.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.metrics import PluginMetrics
from koordlet.testing.builders import QOS_TIER, make_node
from koordlet.testing.clock import FakeClock
from koordlet.testing.fakes import FakeEvictor, FakeExecutor, FakeHostReader, FakeMetrics, FakeStates


@dataclass
class Harness:
    """All fakes wired together; ``ctx`` is the ``PluginContext`` a plugin's ``setup`` receives."""

    clock: FakeClock
    states: FakeStates
    metrics: FakeMetrics
    host: FakeHostReader
    executor: FakeExecutor
    evictor: FakeEvictor
    registry: CollectorRegistry
    options: dict[str, api.OptionValue] = field(default_factory=dict)
    agent: api.AgentOptions = field(default_factory=api.AgentOptions)
    scheduled: list[tuple[float, Callable[[], None]]] = field(default_factory=list)
    handlers: dict[str, list[Callable[[], None]]] = field(default_factory=dict)
    dry_run: bool = False
    fast_samples_wanted: bool = False
    """What the plugin last said through ``ctx.want_fast_samples``."""

    def __post_init__(self) -> None:
        self.plugin_metrics = PluginMetrics(self.registry)

    @property
    def ctx(self) -> api.PluginContext:
        return api.PluginContext(
            node_name="node-1",
            options=self.options,
            states=self.states,
            metrics=self.metrics,
            host=self.host,
            executor=self.executor,
            evictor=self.evictor,
            clock=self.clock,
            logger=logging.getLogger("test.qosplugins"),
            every=lambda interval, fn: self.scheduled.append((interval, fn)),
            subscribe=lambda event, fn: self.handlers.setdefault(event, []).append(fn),
            registry=self.plugin_metrics,
            agent=self.agent,
            dry_run=self.dry_run,
            wall_clock=self.clock.wall,
            want_fast_samples=self._want_fast_samples,
        )

    def _want_fast_samples(self, on: bool) -> None:
        self.fast_samples_wanted = on

    def publish(self, event: str) -> None:
        """Call the plugin's subscribers of ``event`` (``api.EVENT_*``), as the agent's bus would."""
        for fn in self.handlers.get(event, []):
            fn()

    def tick(self) -> None:
        """Run every function the plugin scheduled with ``ctx.every`` once, in order (one period)."""
        for _interval, fn in list(self.scheduled):
            fn()

    def start(self, plugin: api.QOSPlugin) -> api.QOSPlugin:
        """Declare flags (defaults into ``options`` unless set), ``setup`` and ``run`` the plugin."""
        flags = api.FlagSet(plugin.name)
        plugin.init_flags(flags)
        for flag in flags:
            self.options.setdefault(flag.name, flag.default)
        plugin.setup(self.ctx)
        plugin.run(threading.Event())
        return plugin

    def add_pod(self, pod: api.PodInfo, cpuset: str | None = None, quota: int = -1) -> api.PodInfo:
        """Add ``pod`` to the states and its (and its containers') cgroups to the host."""
        self.states.pod_list.append(pod)
        everything = cpuset or api.format_cpuset(c.cpu for c in self.host.topology)
        for d, q in [(pod.cgroup_dir, quota)] + [(c.cgroup_dir, quota) for c in pod.containers]:
            if d:
                self.host.add_cgroup(d, cpuset_cpus=everything, cpu_cfs_quota_us=str(q), cpu_cfs_burst_us="0")
        return pod


def make_harness(
    version: int = 1,
    cpus: Sequence[api.CPUInfo] | None = None,
    node: api.NodeInfo | None = None,
    slo: api.NodeSLO | None = None,
    dry_run: bool = False,
) -> Harness:
    """A fresh harness: tiers ``kubepods``, ``burstable``, ``besteffort`` exist with all CPUs, quota -1."""
    clock = FakeClock()
    host = FakeHostReader(version, cpus)
    ncpu = len(host.topology)
    every_cpu = api.format_cpuset(c.cpu for c in host.topology)
    for tier in QOS_TIER.values():
        host.add_cgroup(tier, cpuset_cpus=every_cpu, cpu_cfs_quota_us="-1")
    return Harness(
        clock=clock,
        states=FakeStates(node or make_node(ncpu * 1000, 16 << 30), (), slo),
        metrics=FakeMetrics(clock),
        host=host,
        executor=FakeExecutor(host, dry_run=dry_run),
        evictor=FakeEvictor(),
        registry=CollectorRegistry(),
        dry_run=dry_run,
    )
