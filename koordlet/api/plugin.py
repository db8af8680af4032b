"""The plugin contract itself: the :class:`QOSPlugin` Protocol, the context it is set up with, a base class.

A QoS plugin is the Python form of Koordinator's ``ExtensionPlugin`` (``InitFlags``/``Setup``/``Run``) plus
a ``shutdown`` hook. Its :class:`PluginContext` holds every service it may use, its own parsed options and
the agent's options it may follow, all typed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Protocol, TypeVar, runtime_checkable

from koordlet.api.flags import FeatureSpec, Flag, FlagSet, OptionValue, Stage
from koordlet.api.metrics import MetricRegistry
from koordlet.api.services import Evictor, HostReader, MetricReader, ResourceWriter, StatesReader
from koordlet.api.types import JSONObject
from koordshared.runtime.errors import PluginError

API_VERSION = 2
"""Bumped on any incompatible change of this package; a plugin may declare ``api_version`` to match.
Version 2: typed options (``ctx.option(flag)``, ``ctx.agent``); ``ctx.registry`` a :class:`MetricRegistry`.
Added within version 2 (nothing a plugin used changed): pod IPs, NodeSLO ``network_qos``, the executor's
sysctl, resctrl and network QoS write kinds, ``host.block_device`` and ``host.resctrl_unsupported``; the
typed NodeSLO ``resource_qos`` and ``system``; ``PodInfo.eviction_enabled``/``priority_value`` and the
mid requests; ``UNKNOWN`` extended allocatable (now the default); ``QOSPluginBase.serves`` (built-ins)."""

T = TypeVar("T", bound=OptionValue)


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """The agent's own options a plugin may follow, parsed and validated by the agent."""

    reconcile_interval: float = 1.0
    """Seconds, ``--reconcile-interval-seconds``: the period of koordlet's reconcile strategies."""
    collect_interval: float = 1.0
    """Seconds, ``--collect-res-used-interval``: how often usage samples reach the metric cache."""
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    """Every koordlet gate (``--feature-gates``) and whether it is on, for a plugin whose behaviour
    another gate changes (``BECPUSuppress`` only recovers under ``BECPUManager``). Absent: off."""


Scheduler = Callable[[float, Callable[[], None]], None]
"""``every(interval_seconds, fn)``: call ``fn`` now and then every interval until stop; a raising tick is
logged and counted (``koordlet_plugin_tick_errors_total``) and the loop goes on."""


@dataclass(frozen=True)
class PluginContext:
    """Everything a plugin gets in :meth:`QOSPlugin.setup`. Keep it; do no failing I/O in ``setup``."""

    node_name: str
    options: Mapping[str, OptionValue]
    """The parsed values of this plugin's own flags by name; read them typed with :meth:`option`."""
    states: StatesReader
    metrics: MetricReader
    host: HostReader
    executor: ResourceWriter
    evictor: Evictor
    clock: Callable[[], float]
    """Monotonic seconds; tests pass a fake clock."""
    logger: logging.Logger
    every: Scheduler
    subscribe: Callable[[str, Callable[[], None]], None]
    """``subscribe(EVENT_*, fn)``: ``fn`` runs on the publisher's thread; keep it short."""
    registry: MetricRegistry
    """Where the plugin makes its own metrics (on the agent's ``/metrics``)."""
    agent: AgentOptions = field(default_factory=AgentOptions)
    dry_run: bool = False
    """When true, plugins compute and log decisions; the executor and evictor do not act."""
    wall_clock: Callable[[], float] = field(default=lambda: 0.0)
    """Seconds since the epoch, for timestamps only (never for rates)."""
    want_fast_samples: Callable[[bool], None] = field(default=lambda _on: None)
    """``want_fast_samples(True)`` while the plugin needs ~40 ms node samples (``EVENT_NODE_SAMPLE``),
    ``False`` when it does not: the agent samples that fast only while some plugin asks (an extension
    that subscribes to the event is counted as asking)."""

    def option(self, flag: Flag[T]) -> T:
        """The value of ``flag`` (declared in ``init_flags``), of the flag's type.

        Raises :class:`PluginError` when the flag was not declared, rather than falling back to a default.
        """
        value = self.options.get(flag.name)
        if value is None or not flag.accepts(value):
            raise PluginError(self.logger.name, f"option --{flag.name} is not one of this plugin's flags")
        return flag.type(value)


@runtime_checkable
class QOSPlugin(Protocol):
    """A QoS plugin (Koordinator's ``ExtensionPlugin`` plus ``shutdown``)."""

    name: ClassVar[str]
    """Registry key and feature-gate key, Koordinator's spelling (``CPUBurst``)."""
    feature: ClassVar[FeatureSpec]

    def init_flags(self, flags: FlagSet) -> None:
        """Declare the plugin's options; called for every plugin, enabled or not."""
        ...

    def setup(self, ctx: PluginContext) -> None:
        """Keep the context. Called only when the plugin's gate is enabled."""
        ...

    def run(self, stop: threading.Event) -> None:
        """Start work and return at once (schedule it with ``ctx.every``)."""
        ...

    def shutdown(self) -> None:
        """Restore what the plugin changed; called in reverse start order when the agent stops."""
        ...


@runtime_checkable
class StatusReporter(Protocol):
    """Optional for a plugin: what it decided last, shown by the agent's ``/status`` and ``koordlet top``.

    Called from the HTTP thread at any time, so it must only read (a snapshot the plugin's tick assigned
    whole, not a structure it is mutating). Keys are camelCase, numbers carry their unit in the key
    (``budgetMilli``); an empty mapping says "nothing decided yet".
    """

    def status(self) -> JSONObject: ...


class QOSPluginBase:
    """Convenience base: stores the context, no flags, nothing to restore. Override what you need."""

    name: ClassVar[str] = ""
    feature: ClassVar[FeatureSpec] = FeatureSpec(default=False, stage=Stage.ALPHA)
    api_version: ClassVar[int] = API_VERSION
    serves: ClassVar[tuple[str, ...]] = ()
    """Built-in plugins only: more of Koordinator's koordlet gates this plugin implements. It is set up
    when its own gate or any of these is on, and reads which are in ``ctx.agent.feature_gates`` (one
    Koordinator strategy behind several gates: its CPU evictor serves ``BECPUEvict``,
    ``CPUAllocatableEvict`` and ``CPUEvict`` with one cool-down)."""
    ctx: PluginContext

    def init_flags(self, flags: FlagSet) -> None:
        return None

    def setup(self, ctx: PluginContext) -> None:
        self.ctx = ctx

    def run(self, stop: threading.Event) -> None:
        return None

    def shutdown(self) -> None:
        return None
