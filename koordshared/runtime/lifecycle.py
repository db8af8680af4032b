"""Threads and the one stop Event: Go's ``wait.Until`` and goroutine supervision, for the whole agent.

Agent threads are created only here. ``until`` runs a periodic tick until stop (a raising tick is logged and
counted, never fatal), ``until_all`` several ticks of one period in one thread; ``Supervisor`` starts named
root threads and turns the death of one into an agent stop with a non-zero exit, so the kubelet restarts
the pod (koordlet's ``klog.Fatal``). ``Daemon`` runs a process's components in order (each waited for until
synced, ``/readyz`` once all are, stopped in reverse within a deadline) for the agent and the cluster
processes alike; ``install_signals`` turns SIGTERM/SIGINT into the stop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Protocol

from koordshared.runtime.httpserver import ProcessHTTPServer, text_response

log = logging.getLogger(__name__)

TickErrorHook = Callable[[str, BaseException], None]
TickTimingHook = Callable[[str, float, float], None]
"""``(name, duration_seconds, lateness_seconds)`` after every tick."""


@dataclass(frozen=True, slots=True)
class Tick:
    """One periodic function of :func:`until_all`, with its own name and hooks."""

    name: str
    fn: Callable[[], None]
    on_error: TickErrorHook | None = None
    on_tick: TickTimingHook | None = None


def until(
    fn: Callable[[], None],
    period: float,
    stop: threading.Event,
    *,
    name: str,
    on_error: TickErrorHook | None = None,
    on_tick: TickTimingHook | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Call ``fn`` now and then every ``period`` seconds until ``stop`` is set (:func:`until_all`)."""
    until_all([Tick(name, fn, on_error, on_tick)], period, stop, clock=clock)


def until_all(
    ticks: Sequence[Tick],
    period: float,
    stop: threading.Event,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Call each tick's ``fn`` in order, now and then every ``period`` seconds, until ``stop`` is set.

    Ticks are scheduled on a fixed grid (not sliding) so a slow tick does not drift the schedule; a round
    that overruns skips the missed slots instead of bursting. A raising ``fn`` is logged and counted, never
    fatal, and the next one still runs. Lateness (start minus planned start) is reported to ``on_tick``
    because the agent is slowest exactly when LS load saturates the node. Ticks of one period share the
    thread: each timed wake-up of a Python thread costs CPU even when idle.
    """
    period = max(period, 0.001)
    planned = clock()
    while not stop.is_set():
        for tick in ticks:
            started = clock()
            try:
                tick.fn()
            except Exception as err:  # a failed tick is logged and counted, never fatal
                log.exception("%s: tick failed", tick.name)
                if tick.on_error is not None:
                    tick.on_error(tick.name, err)
            if tick.on_tick is not None:
                tick.on_tick(tick.name, clock() - started, max(started - planned, 0.0))
        finished = clock()
        planned += period
        if planned < finished:
            missed = int((finished - planned) // period) + 1
            planned += missed * period
        if stop.wait(max(planned - clock(), 0.0)):
            return


@dataclass
class Supervisor:
    """Starts named, non-daemon root threads; a thread that dies with an exception stops the agent."""

    stop: threading.Event
    threads: list[threading.Thread] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def go(self, name: str, target: Callable[[], None], *, daemon: bool = False) -> threading.Thread:
        """Run ``target`` in a thread named ``name``; if it raises, record the failure and set stop."""

        def wrapper() -> None:
            try:
                target()
            except BaseException as err:
                log.error("component %s died: %r; stopping the agent", name, err, exc_info=err)
                with self._lock:
                    self.failures.append(f"{name}: {err!r}")
                self.stop.set()

        thread = threading.Thread(target=wrapper, name=name, daemon=daemon)
        with self._lock:
            self.threads.append(thread)
        thread.start()
        return thread

    def every(
        self,
        name: str,
        period: float,
        fn: Callable[[], None],
        *,
        on_error: TickErrorHook | None = None,
        on_tick: TickTimingHook | None = None,
    ) -> threading.Thread:
        """A periodic tick in its own thread (``until`` under supervision)."""
        return self.go(
            name, lambda: until(fn, period, self.stop, name=name, on_error=on_error, on_tick=on_tick)
        )

    def every_all(self, name: str, period: float, ticks: Sequence[Tick]) -> threading.Thread:
        """Several periodic ticks of one period in one thread (:func:`until_all`)."""
        return self.go(name, lambda: until_all(ticks, period, self.stop))

    def join(self, deadline: float) -> list[str]:
        """Join every thread until ``deadline`` (monotonic); return the names still alive."""
        with self._lock:
            threads = list(self.threads)
        for thread in threads:
            if thread is threading.current_thread():
                continue
            thread.join(max(deadline - time.monotonic(), 0.0))
        return [t.name for t in threads if t.is_alive() and t is not threading.current_thread()]

    @property
    def failed(self) -> bool:
        with self._lock:
            return bool(self.failures)


def wait_for(
    condition: Callable[[], bool], stop: threading.Event, *, timeout: float, poll: float = 0.05
) -> bool:
    """Wait until ``condition()`` holds (True), ``stop`` is set or ``timeout`` passes (False)."""
    deadline = time.monotonic() + timeout
    while not stop.is_set():
        if condition():
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        stop.wait(min(poll, left))
    return False


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
    must_sync: bool = False
    """What starts after it never starts on its unsynced state: past the sync timeout the wait goes on,
    reported each timeout (a cluster process's informers: kube's ``WaitForCacheSync`` has no deadline, and
    a scheduler or descheduler working from a partial pod cache overcommits nodes or evicts past its
    limits). Without it the next components start after the timeout anyway (the agent samples regardless)."""

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
    http: ProcessHTTPServer | None = None
    sync_timeout: float = SYNC_TIMEOUT
    probe_http: Sequence[ProcessHTTPServer] = ()
    """Listeners serving only ``/healthz`` and ``/readyz`` (a separate health-probe address)."""
    on_ready: Callable[[], None] = lambda: None
    ready: threading.Event = field(default_factory=threading.Event)
    started: list[str] = field(default_factory=list)

    def _servers(self) -> list[ProcessHTTPServer]:
        return [*([self.http] if self.http is not None else []), *self.probe_http]

    def _install_probes(self) -> None:
        def readyz(_q: dict[str, list[str]]) -> tuple[int, str, bytes]:
            if self.ready.is_set():
                return text_response("ok\n")
            return text_response("starting: " + ", ".join(self.started) + "\n", 503)

        for http in self._servers():
            http.route("/healthz", lambda _q: text_response("ok\n"), probe=True)
            http.route("/readyz", readyz, probe=True)

    def _wait_synced(self, component: Component, stop: threading.Event) -> None:
        """Until ``component`` syncs or ``stop``; past the sync timeout, go on unless it must sync."""
        waited = 0.0
        # A short poll: the next component (the scheduling loop) starts within 10 ms of the sync, which is
        # the process's time to its first work.
        while not wait_for(component.has_synced, stop, timeout=self.sync_timeout, poll=0.01):
            if stop.is_set():
                return
            waited += self.sync_timeout
            if not getattr(component, "must_sync", False):
                log.warning("%s has not synced after %gs; going on", component.name, waited)
                return
            log.warning(
                "%s has not synced after %gs; still waiting, nothing works from a partial view of the"
                " cluster (check that the API server answers lists and this process's RBAC allows them)",
                component.name,
                waited,
            )

    def run(self, stop: threading.Event) -> int:
        """Run until ``stop``; return the process exit code (0 graceful, 1 a root component died)."""
        supervisor = self.supervisor
        self._install_probes()
        for http in self._servers():
            http.start()
            log.info("serving HTTP on port %d", http.port)
        try:
            for component in self.components:
                if stop.is_set():
                    break
                log.info("starting %s", component.name)
                component.start(stop, supervisor)
                self.started.append(component.name)
                if getattr(component, "wait_sync", True):
                    self._wait_synced(component, stop)
            if not stop.is_set():
                self.ready.set()
                self.on_ready()
                log.info("ready")
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
            for http in self._servers():
                http.shutdown()
        if supervisor.failed:
            log.error("exiting with status 1: %s", "; ".join(supervisor.failures))
            return 1
        log.info("stopped")
        return 0


@contextlib.contextmanager
def install_signals(stop: threading.Event) -> Iterator[None]:
    """While inside: the first SIGTERM/SIGINT stops gracefully, a second forces exit (uvicorn's
    force_exit). The handlers found are restored on the way out, so an embedding caller keeps its own."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    count = [0]

    def handler(signum: int, _frame: FrameType | None) -> None:
        count[0] += 1
        if count[0] > 1:
            os._exit(130 if signum == signal.SIGINT else 143)
        stop.set()

    before = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in before.items():
            signal.signal(sig, old)
