"""The QoS manager: sets up and runs the enabled plugins, supervises their ticks, shuts them down.

Unlike koordlet, which calls ``Setup`` on every registered plugin, only enabled plugins are set up, so a
disabled plugin has no side effects at all. A plugin whose ``setup``, ``run`` or periodic tick raises is
logged, counted and marked failed; the others go on. ``shutdown`` runs in reverse start order.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from koordlet import api
from koordlet.featuregates import FeatureGate
from koordlet.metrics import AgentMetrics
from koordlet.qosmanager.loader import PluginEntry
from koordshared.runtime.eventbus import EventBus
from koordshared.runtime.lifecycle import Supervisor

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Services:
    """What the daemon hands to every plugin context."""

    node_name: str
    states: api.StatesReader
    metrics: api.MetricReader
    host: api.HostReader
    executor: api.ResourceWriter
    evictor: api.Evictor
    clock: Callable[[], float]
    wall_clock: Callable[[], float]
    bus: EventBus
    registry: api.MetricRegistry
    agent: api.AgentOptions = field(default_factory=api.AgentOptions)
    dry_run: bool = False
    degraded: Callable[[], bool] = lambda: False
    """True while the pod list is stale past its bound (kubelet unreachable, garbage answers): plugins
    then stop acting on it, their ticks and event handlers skipped until a good list comes back."""
    want_fast_samples: Callable[[str, bool], None] = lambda _owner, _on: None
    """``(plugin, on)``: the fast sampler runs while any plugin wants it."""


def is_enabled(entry: PluginEntry, gates: FeatureGate, ext_gates: FeatureGate) -> bool:
    """A plugin runs when its gate, or a gate it serves (built-ins only), is on."""
    if not entry.builtin:
        return ext_gates.enabled(entry.name)
    return any(gates.enabled(g) for g in entry.gates)


class QOSManager:
    """Hosts plugins for the lifetime of one agent run."""

    def __init__(
        self,
        entries: Sequence[PluginEntry],
        gates: FeatureGate,
        ext_gates: FeatureGate,
        options: Mapping[str, api.OptionValue],
        services: Services,
        supervisor: Supervisor,
        metrics: AgentMetrics | None = None,
    ) -> None:
        self._entries = list(entries)
        self._gates = gates
        self._ext_gates = ext_gates
        self._options = dict(options)
        self._services = services
        self._supervisor = supervisor
        self._metrics = metrics
        self._started: list[PluginEntry] = []
        self._state: dict[str, str] = {}
        self._lock = threading.Lock()
        self._paused = False

    # -- state -----------------------------------------------------------------------------------

    def _set_state(self, entry: PluginEntry, state: str) -> None:
        with self._lock:
            self._state[entry.name] = state
        if self._metrics is not None:
            self._metrics.set_plugin_state(entry.name, entry.source, state)

    def states(self) -> dict[str, str]:
        with self._lock:
            return dict(self._state)

    def report(self) -> list[dict[str, api.JSONValue]]:
        """Every plugin: name, source, state and, for a running :class:`api.StatusReporter`, its
        ``status()`` (a raising one is reported as ``{"error": ...}``, never fatal to the caller)."""
        states = self.states()
        out: list[dict[str, api.JSONValue]] = []
        for entry in self._entries:
            state = states.get(entry.name, "pending")
            row: dict[str, api.JSONValue] = {"name": entry.name, "source": entry.source, "state": state}
            if state == "running" and isinstance(entry.plugin, api.StatusReporter):
                try:
                    row["status"] = dict(entry.plugin.status())
                except Exception as err:
                    log.debug("plugin %s: status() failed", entry.name, exc_info=True)
                    row["status"] = {"error": repr(err)}
            out.append(row)
        return out

    def _fail(self, entry: PluginEntry, what: str, err: BaseException) -> None:
        log.error("plugin %s: %s failed: %r", entry.name, what, err, exc_info=err)
        if self._metrics is not None:
            self._metrics.tick_error(f"plugin/{entry.name}", err)
        self._set_state(entry, "failed")

    # -- context ---------------------------------------------------------------------------------

    def _context(self, entry: PluginEntry) -> api.PluginContext:
        svc = self._services
        component = f"plugin/{entry.name}"

        def on_error(_name: str, err: BaseException) -> None:
            if self._metrics is not None:
                self._metrics.tick_error(component, err)

        def on_tick(_name: str, duration: float, lateness: float) -> None:
            if self._metrics is not None:
                self._metrics.tick_timing(component, duration, lateness)

        counter = [0]

        def every(interval: float, fn: Callable[[], None]) -> None:
            if not interval > 0:
                raise ValueError(f"{component}: every() needs a positive interval, got {interval!r}")
            counter[0] += 1
            name = f"{component}#{counter[0]}"
            self._supervisor.every(
                name, interval, self._unless_degraded(fn), on_error=on_error, on_tick=on_tick
            )

        def subscribe(event: str, fn: Callable[[], None]) -> None:
            svc.bus.subscribe(event, self._unless_degraded(fn), owner=component)
            if event == api.EVENT_NODE_SAMPLE and not entry.builtin:
                # an extension written before ``want_fast_samples`` had the samples whenever it subscribed
                svc.want_fast_samples(entry.name, True)

        def want_fast_samples(on: bool) -> None:
            svc.want_fast_samples(entry.name, on)

        return api.PluginContext(
            node_name=svc.node_name,
            options={f.name: self._options.get(f.name, f.default) for f in entry.flags},
            states=svc.states,
            metrics=svc.metrics,
            host=svc.host,
            executor=svc.executor,
            evictor=svc.evictor,
            clock=svc.clock,
            logger=logging.getLogger(f"koordlet.plugin.{entry.name}"),
            every=every,
            subscribe=subscribe,
            registry=svc.registry,
            agent=svc.agent,
            dry_run=svc.dry_run,
            wall_clock=svc.wall_clock,
            want_fast_samples=want_fast_samples,
        )

    def _unless_degraded(self, fn: Callable[[], None]) -> Callable[[], None]:
        """``fn``, skipped while the states informer is degraded (F9: a stale pod list is no basis for
        throttling or evicting; sampling goes on). The pause and the resume are logged once each."""
        degraded = self._services.degraded

        def guarded() -> None:
            if degraded():
                with self._lock:
                    first, self._paused = not self._paused, True
                if first:
                    log.warning("QoS plugins paused: the pod list is stale (states informer degraded)")
                return
            with self._lock:
                resumed, self._paused = self._paused, False
            if resumed:
                log.info("QoS plugins resumed: the pod list is fresh again")
            fn()

        return guarded

    # -- lifecycle -------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Set up and start every enabled plugin; returns at once."""
        for entry in self._entries:
            if not is_enabled(entry, self._gates, self._ext_gates):
                self._set_state(entry, "disabled")
                log.info("plugin %s is disabled (%s)", entry.name, entry.gate_flag)
                continue
            try:
                entry.plugin.setup(self._context(entry))
            except Exception as err:
                self._fail(entry, "setup", err)
                continue
            self._started.append(entry)
            try:
                entry.plugin.run(stop)
            except Exception as err:
                self._fail(entry, "run", err)
                continue
            self._set_state(entry, "running")
            log.info("plugin %s started (%s)", entry.name, entry.source)

    def shutdown(self) -> None:
        """``shutdown()`` on every set-up plugin, in reverse start order; errors are logged, not raised."""
        for entry in reversed(self._started):
            try:
                entry.plugin.shutdown()
            except Exception as err:
                self._fail(entry, "shutdown", err)
            else:
                self._set_state(entry, "stopped")
            self._services.bus.unsubscribe_owner(f"plugin/{entry.name}")
        self._started.clear()
