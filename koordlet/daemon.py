"""The agent in one place: :func:`new_daemon` builds every component, :meth:`Daemon.run` runs them.

koordlet's ``NewDaemon`` + ``Run``. This is the one module that knows every concrete class; each component
gets its own frozen config from :class:`koordlet.config.Configuration`, plugins see only ``koordlet.api``.
Start order: resource executor → metric cache → states informer (wait for sync) → metrics advisor (wait
for first samples) → QoS manager (plugins) → ready. ``/healthz`` answers as soon as the HTTP server is up;
``/readyz`` only once the whole order has completed. A root component that dies sets ``stop`` and the
process exits non-zero so the kubelet restarts it; stop runs the order backwards.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import CollectorRegistry

from koordlet.config import Configuration
from koordlet.errors import ConfigError
from koordlet.eventbus import EventBus
from koordlet.featuregates import FeatureGate
from koordlet.httpserver import AgentHTTPServer, Route, json_response, text_response
from koordlet.lifecycle import Supervisor, wait_for
from koordlet.metriccache.cache import MetricCache
from koordlet.metrics import AgentMetrics, PluginMetrics
from koordlet.qosmanager.evictor import Evictor
from koordlet.qosmanager.loader import PluginEntry
from koordlet.qosmanager.manager import QOSManager, Services
from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.system import native
from koordlet.system.host import Host

log = logging.getLogger(__name__)

SYNC_TIMEOUT = 60.0
STOP_DEADLINE = 4.0
"""Seconds to join threads at stop; the CLI promises a graceful stop within 5 s."""


class Component(Protocol):
    """A root component: ``start`` returns at once; ``has_synced`` gates the next step."""

    name: str

    def start(self, stop: threading.Event, supervisor: Supervisor) -> None: ...

    def has_synced(self) -> bool: ...

    def shutdown(self) -> None: ...


@dataclass
class FuncComponent:
    """A component made of plain functions (adapts objects whose methods have other names)."""

    name: str
    start_fn: Callable[[threading.Event, Supervisor], None]
    synced_fn: Callable[[], bool] = lambda: True
    shutdown_fn: Callable[[], None] = lambda: None
    wait_sync: bool = True

    def start(self, stop: threading.Event, supervisor: Supervisor) -> None:
        self.start_fn(stop, supervisor)

    def has_synced(self) -> bool:
        return self.synced_fn()

    def shutdown(self) -> None:
        self.shutdown_fn()


@dataclass
class Daemon:
    """Runs components in order; owns the HTTP server and the supervisor."""

    components: Sequence[Component]
    supervisor: Supervisor
    http: AgentHTTPServer | None = None
    sync_timeout: float = SYNC_TIMEOUT
    on_ready: Callable[[], None] = lambda: None
    ready: threading.Event = field(default_factory=threading.Event)
    started: list[str] = field(default_factory=list)

    def _install_probes(self) -> None:
        if self.http is None:
            return
        self.http.route("/healthz", lambda _q: text_response("ok\n"))

        def readyz(_q: dict[str, list[str]]) -> tuple[int, str, bytes]:
            if self.ready.is_set():
                return text_response("ok\n")
            return text_response("starting: " + ", ".join(self.started) + "\n", 503)

        self.http.route("/readyz", readyz)

    def run(self, stop: threading.Event) -> int:
        """Run until ``stop``; return the process exit code (0 graceful, 1 a root component died)."""
        supervisor = self.supervisor
        self._install_probes()
        if self.http is not None:
            self.http.start()
            log.info("serving HTTP on port %d", self.http.port)
        try:
            for component in self.components:
                if stop.is_set():
                    break
                log.info("starting %s", component.name)
                component.start(stop, supervisor)
                self.started.append(component.name)
                if getattr(component, "wait_sync", True) and not wait_for(
                    component.has_synced, stop, timeout=self.sync_timeout
                ):
                    if stop.is_set():
                        break
                    log.warning("%s has not synced after %.0fs; going on", component.name, self.sync_timeout)
            if not stop.is_set():
                self.ready.set()
                self.on_ready()
                log.info("koordlet is ready")
            stop.wait()
        except Exception:
            log.exception("startup failed")
            supervisor.failures.append("startup")
            stop.set()
        finally:
            self.ready.clear()
            deadline = time.monotonic() + STOP_DEADLINE
            for name in reversed(self.started):
                component = next(c for c in self.components if c.name == name)
                try:
                    component.shutdown()
                except Exception:
                    log.exception("shutdown of %s failed", name)
            alive = supervisor.join(deadline)
            if alive:
                log.warning("threads still running at exit: %s", ", ".join(alive))
            if self.http is not None:
                self.http.shutdown()
        if supervisor.failed:
            log.error("exiting with status 1: %s", "; ".join(supervisor.failures))
            return 1
        log.info("stopped")
        return 0


def _events_route(executor: ResourceExecutor) -> Route:
    def route(query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        try:
            since = int(query.get("since", ["0"])[0])
            limit = int(query.get("limit", ["256"])[0])
        except ValueError:
            return json_response({"error": "since and limit must be integers"}, 400)
        return json_response({"events": executor.events(since_seq=since, limit=limit)})

    return route


def new_daemon(
    cfg: Configuration,
    entries: Sequence[PluginEntry],
    gates: FeatureGate,
    ext_gates: FeatureGate,
    stop: threading.Event,
) -> Daemon:
    """Build the whole agent, each component from its own config in ``cfg`` (nothing starts until
    :meth:`Daemon.run`). Host paths, clocks and the Prometheus registry are made here and injected."""
    # Imported here: the informer pulls in the kubernetes client, which `koordlet version` never needs.
    from koordlet.metricsadvisor.advisor import MetricsAdvisor
    from koordlet.statesinformer.informer import StatesInformer

    clock, wall = time.monotonic, time.time
    registry = CollectorRegistry(auto_describe=False)
    agent_metrics = AgentMetrics(registry, cfg.node_name)
    agent_metrics.started(native.HAS_NATIVE)
    supervisor = Supervisor(stop)
    bus = EventBus(on_error=agent_metrics.tick_error)

    try:
        host = Host(cfg.paths)
    except OSError as err:
        raise ConfigError(f"cannot read the host under {cfg.paths.cgroup_root}: {err}") from err
    log.info("host: %r", host)
    executor = ResourceExecutor(
        cfg.paths,
        config=cfg.executor,
        clock=clock,
        wall_clock=wall,
        registry=registry,
        mode=host.mode,
    )
    cache = MetricCache(
        cfg.cache,
        clock=clock,
        wall_clock=wall,
        registry=registry,
    )
    informer = StatesInformer(
        cfg.informer,
        host,
        cache,
        bus,
        registry,
        clock=clock,
        wall_clock=wall,
    )
    advisor = MetricsAdvisor(
        cfg.advisor,
        host=host,
        cache=cache,
        states=informer,
        bus=bus,
        registry=registry,
        clock=clock,
    )
    evictor = Evictor(
        node=cfg.node_name,
        host=host,
        audit=executor.audit,
        clock=clock,
        registry=registry,
        only_by_api=cfg.qos.only_evict_by_api,
        eviction_api=None if informer.standalone else informer,
        dry_run=cfg.qos.dry_run,
    )
    services = Services(
        node_name=cfg.node_name,
        states=informer,
        metrics=cache,
        host=host,
        executor=executor,
        evictor=evictor,
        clock=clock,
        wall_clock=wall,
        bus=bus,
        registry=PluginMetrics(registry),
        agent=cfg.qos.agent,
        dry_run=cfg.qos.dry_run,
    )
    qos = QOSManager(entries, gates, ext_gates, cfg.options, services, supervisor, agent_metrics)

    def force_update() -> None:
        for result in executor.reconcile_owned():
            if result.written:
                log.info(
                    "repaired %s of %s (owner %s)",
                    result.update.resource,
                    result.update.cgroup_dir,
                    result.update.owner,
                )

    def start_executor(s: threading.Event, sup: Supervisor) -> None:
        sup.every(
            "resourceexecutor/force-update",
            max(cfg.executor.force_update_seconds / 4, 1.0),
            force_update,
            on_error=agent_metrics.tick_error,
        )

    def start_cache(s: threading.Event, sup: Supervisor) -> None:
        loaded = cache.load()
        log.info("metric cache: %d samples restored", loaded)
        sup.go("metriccache/checkpoint", lambda: cache.run_loop(s))

    components = [
        FuncComponent("resourceexecutor", start_executor),
        FuncComponent("metriccache", start_cache),
        FuncComponent("statesinformer", informer.start, informer.has_synced, informer.shutdown),
        FuncComponent("metricsadvisor", advisor.start, advisor.has_synced, advisor.shutdown),
        FuncComponent("qosmanager", lambda s, _sup: qos.run(s), lambda: True, qos.shutdown),
    ]
    http = AgentHTTPServer(cfg.host, cfg.port, registry)
    http.route("/nodemetric", lambda _q: json_response(informer.nodemetric_status()))
    http.route("/events", _events_route(executor))
    http.route("/plugins", lambda _q: json_response(qos.states()))
    return Daemon(components, supervisor, http)
