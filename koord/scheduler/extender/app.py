"""Builds the extender process: plugins and profile first (so a bad ``--config`` fails before anything
connects), then the API client, the informers, the handle, the framework, the extender and its server;
:func:`run` runs it under the shared cluster-process daemon until stopped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from koord.scheduler.extender.binder import APIBinder
from koord.scheduler.extender.handle import ExtenderHandle, build_informers
from koord.scheduler.extender.metrics import ExtenderMetrics
from koord.scheduler.extender.server import ExtenderServer
from koord.scheduler.extender.verbs import Extender
from koord.scheduler.framework.profile import Profile, default_profile, load_profile
from koord.scheduler.framework.runtime import Framework
from koord.scheduler.plugins import plugin_registry
from koordshared.kube.client import make_api_client
from koordshared.kube.memstore import MemoryStore
from koordshared.kube.process import Address
from koordshared.runtime import heap
from koordshared.runtime.httpaccess import TLSConfig, ssl_context
from koordshared.runtime.lifecycle import Component, Daemon, FuncComponent, Supervisor
from koordshared.runtime.pluginregistry import EntryPoints, Registry

log = logging.getLogger(__name__)
USER_AGENT = "koord-scheduler-extender"


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    addr: Address
    kubeconfig: str = ""
    config_file: str = ""
    tls: TLSConfig | None = None
    bind_timeout: float = 4.0
    """Below kube-scheduler's extender ``httpTimeout`` (5 s by default), so a slow API answer is ours to
    report, not a timeout that leaves kube-scheduler unsure whether the pod was bound."""
    sync_timeout: float = 60.0


GC_THRESHOLDS = (50_000, 20, 100)
"""A /filter over 5000 nodes allocates tens of thousands of short-lived containers: with Python's
default first threshold (700) the collector ran dozens of times per call, each time walking objects a
moment away from being freed anyway (a third of the call's time). With 50 000 it runs every few calls."""


def load(cfg: ExtenderConfig) -> Profile:
    return load_profile(cfg.config_file) if cfg.config_file else default_profile()


def check_profile(profile: Profile, registry: Registry) -> Framework:
    """Build the profile's plugins over empty caches: unknown names and bad args fail here, offline."""
    empty = ExtenderHandle(MemoryStore(), MemoryStore(), MemoryStore())
    return Framework(profile, registry, empty)


class ExtenderApp:
    def __init__(
        self,
        cfg: ExtenderConfig,
        registry: CollectorRegistry,
        *,
        api_client: Any = None,
        entry_points: EntryPoints | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cfg = cfg
        plugins = plugin_registry(entry_points)
        profile = load(cfg)
        check_profile(profile, plugins)
        tls = ssl_context(cfg.tls) if cfg.tls is not None else None
        self.api = api_client or make_api_client(cfg.kubeconfig, user_agent=USER_AGENT)
        self.informers = build_informers(self.api)
        inf = self.informers
        self.handle = ExtenderHandle(inf["nodes"], inf["pods"], inf["nodemetrics"], clock=clock)
        self.metrics = ExtenderMetrics(registry)
        self.framework = Framework(profile, plugins, self.handle, timer=self.metrics.observe_plugin)
        self.daemon_ready = threading.Event()
        self.extender = Extender(
            self.framework, self.handle, self.metrics, APIBinder(self.api, cfg.bind_timeout), ready=self.ready
        )
        self.metrics.watch_caches(self.extender.cache_sizes)
        self.server = ExtenderServer(cfg.addr.host, cfg.addr.port, self.extender, ready=self.ready, tls=tls)

    def ready(self) -> bool:
        return self.daemon_ready.is_set() and self.handle.has_synced()

    def _on_ready(self) -> None:
        heap.settle(collect=True, thresholds=GC_THRESHOLDS)
        self.daemon_ready.set()

    def _start_informers(self, stop: threading.Event, supervisor: Supervisor) -> None:
        heap.hold()  # until ready (:meth:`_on_ready`)
        for inf in self.informers:
            supervisor.go(f"informer-{inf.name}", lambda inf=inf: inf.run(stop))  # type: ignore[misc]

    def _close_informers(self) -> None:
        for inf in self.informers:
            inf.close()

    def components(self) -> list[Component]:
        return [
            FuncComponent(
                "informers",
                self._start_informers,
                self.handle.has_synced,
                self._close_informers,
                must_sync=True,
            )
        ]

    def run(self, stop: threading.Event) -> int:
        """Serve until ``stop``; the exit code (1 when a root thread died)."""
        daemon = Daemon(self.components(), Supervisor(stop), None, sync_timeout=self.cfg.sync_timeout)
        daemon.on_ready = self._on_ready
        self.server.start()
        log.info("serving HTTP on port %d", self.server.port)
        try:
            return daemon.run(stop)
        finally:
            self.daemon_ready.clear()
            self.server.shutdown()

    def close(self) -> None:
        self.api.close()
