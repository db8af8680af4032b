"""The daemon: fixes koordlet's start order, serves HTTP, supervises threads, stops in reverse.

Start order: resource executor → metric cache → states informer (wait for sync) → metrics advisor (wait
for first samples) → QoS manager (plugins) → ready. ``/healthz`` answers as soon as the HTTP server is up;
``/readyz`` only once the whole order has completed. A root component that dies sets ``stop`` and the
process exits non-zero so the kubelet restarts it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from koordlet.httpserver import AgentHTTPServer, text_response
from koordlet.runtime import Supervisor, wait_for

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
