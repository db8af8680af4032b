"""koord-descheduler wired: plugins and profiles first (a bad ``--config`` fails before anything connects),
then the API client, the shared caches, the Event recorder, one framework per profile, leader election
and the rounds.

A round (Koordinator's ``deschedulerOnce``), only while this replica leads: the Ready nodes through the
configuration's ``nodeSelector`` (nothing to do with one node or none: evicting would only disrupt);
the round limits reset; every profile's Deschedule plugins on the nodes its own ``nodeSelector`` keeps;
then every profile's Balance plugins. Rounds run every ``deschedulingInterval``; with no interval, one
round runs once the caches are synced (and this replica leads), then the process exits.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry

from koord.descheduler.config import Configuration, DeschedulerConfig
from koord.descheduler.evictor import NAME as MIGRATION_CONTROLLER
from koord.descheduler.evictor import MigrationController
from koord.descheduler.framework import DEPRECATED_ENTRY_POINT_GROUPS, ENTRY_POINT_GROUP
from koord.descheduler.framework.interface import BackgroundPlugin, Informers, Obj
from koord.descheduler.framework.runtime import Environment, Framework, RoundLimiter
from koord.descheduler.informers import MemoryInformers, SharedInformers
from koord.descheduler.metrics import DeschedulerMetrics
from koord.descheduler.plugins import BUILTIN
from koordshared import __version__
from koordshared.apis.core.node import is_ready, select
from koordshared.apis.meta.groups import PODS
from koordshared.kube.client import make_api_client
from koordshared.kube.eventsv1 import EventBroadcaster, EventRecorder
from koordshared.kube.leaderelection import KubeLeaseClient, LeaderElector
from koordshared.kube.objectref import NoKind, ObjectRef
from koordshared.runtime import heap
from koordshared.runtime.lifecycle import Component, FuncComponent, Supervisor
from koordshared.runtime.pluginregistry import EntryPoints, Registry, discover

log = logging.getLogger(__name__)

USER_AGENT = "koord-descheduler"


def plugin_registry(entry_points: EntryPoints | None = None) -> Registry:
    """The built-ins (with the MigrationController evictor), then the installed plugins of
    :data:`ENTRY_POINT_GROUP` (and its old names)."""
    builtins = {**BUILTIN, MIGRATION_CONTROLLER: MigrationController}
    return discover(
        builtins, ENTRY_POINT_GROUP, deprecated=DEPRECATED_ENTRY_POINT_GROUPS, entry_points=entry_points
    )


class PodEvents:
    """The framework's ``EventRecorder`` on an ``events.k8s.io/v1`` recorder, as the descheduler's
    ``Eventf(regarding, nil, type, reason, action, note)``: the object is a pod unless it names its kind."""

    def __init__(self, recorder: EventRecorder) -> None:
        self.recorder = recorder

    def event(self, obj: Obj, type_: str, reason: str, message: str, *, action: str = "Descheduling") -> None:
        try:
            ref = ObjectRef.of(obj, PODS)
        except NoKind as err:
            log.error("event %s not recorded: %s", reason, err)
            return
        self.recorder.eventf(ref, None, type_, reason, action, message)


class _NoEvents:
    def event(self, obj: Obj, type_: str, reason: str, message: str, *, action: str = "Descheduling") -> None:
        pass


def check_profiles(conf: Configuration, registry: Registry) -> list[Framework]:
    """Build every profile over empty caches and no client: unknown plugins and bad args fail here."""
    env = Environment(client=None, informers=MemoryInformers(), recorder=_NoEvents(), interval=conf.interval)
    return [Framework(p, registry, env) for p in conf.profiles]


class Descheduler:
    def __init__(
        self,
        cfg: DeschedulerConfig,
        registry: CollectorRegistry,
        *,
        api_client: Any = None,
        informers: Informers | None = None,
        entry_points: EntryPoints | None = None,
        plugins: Registry | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = cfg
        conf = cfg.configuration
        self.registry = plugins or plugin_registry(entry_points)
        check_profiles(conf, self.registry)
        self.metrics = DeschedulerMetrics(registry)
        identity = cfg.election.identity if cfg.leader_election else "no-election"
        self.api = api_client or make_api_client(
            cfg.kubeconfig, user_agent=f"{USER_AGENT}/{__version__} ({identity})"
        )
        self.informers: Any = informers or SharedInformers(self.api, request_timeout=cfg.request_timeout)
        self.events = EventBroadcaster(self.api, request_timeout=cfg.request_timeout)
        self.elector: LeaderElector | None = None
        if cfg.leader_election:
            lease = KubeLeaseClient(self.api, cfg.election.namespace, cfg.election.name)
            self.elector = LeaderElector(cfg.election, lease)
        self.is_leader: Callable[[], bool] = self.elector.is_leader if self.elector else (lambda: True)
        self.metrics.bind_leader(self.is_leader)
        if hasattr(self.informers, "sizes"):
            self.metrics.bind_caches(self.informers.sizes)
        self.env = Environment(
            client=self.api,
            informers=self.informers,
            recorder=PodEvents(self.events.new_recorder(USER_AGENT)),
            dry_run=conf.dry_run,
            interval=conf.interval,
            limiter=RoundLimiter(conf.limits),
            counter=self.metrics,
            now=clock,
            monotonic=monotonic,
            may_act=self.is_leader,
        )
        self.frameworks = [Framework(p, self.registry, self.env) for p in conf.profiles]
        self._monotonic = monotonic
        self.rounds = 0

    # ---- one round -----------------------------------------------------------------------------------

    def ready_nodes(self) -> list[Obj]:
        nodes = [n for n in self.informers.nodes.objects() if is_ready(n)]
        return select(nodes, self.cfg.configuration.node_selector)

    def run_round(self) -> str:
        """One round; its result (``ok``, ``errors``, ``skipped``, ``not-leader``)."""
        if not self.is_leader():
            self.metrics.rounds.labels(result="not-leader").inc()
            return "not-leader"
        started = self._monotonic()
        self.rounds += 1
        nodes = self.ready_nodes()
        if len(nodes) <= 1:
            log.info(
                "round %d: %d Ready node(s): evicting would only disrupt, nothing to do",
                self.rounds,
                len(nodes),
            )
            self.metrics.rounds.labels(result="skipped").inc()
            return "skipped"
        self.env.limiter.reset()
        for fw in self.frameworks:
            fw.begin_round()
        errors: list[str] = []
        for run in ("run_deschedule", "run_balance"):
            for fw in self.frameworks:
                errors += getattr(fw, run)(select(nodes, fw.profile.node_selector))
        seconds = self._monotonic() - started
        self.metrics.round_duration.observe(seconds)
        result = "errors" if errors else "ok"
        self.metrics.rounds.labels(result=result).inc()
        evicted = self.env.limiter.total
        log.info(
            "round %d: %d nodes, %d eviction(s)%s in %.0f ms%s",
            self.rounds,
            len(nodes),
            evicted,
            " (dry run)" if self.env.dry_run else "",
            seconds * 1000,
            "; errors: " + "; ".join(errors) if errors else "",
        )
        return result

    def tick(self) -> None:
        self.run_round()

    # ---- lifecycle ------------------------------------------------------------------------------------

    def _start_informers(self, stop: threading.Event, supervisor: Supervisor) -> None:
        heap.hold()  # until the caches are synced (:meth:`_start_rounds`)
        self.env.stop = stop
        supervisor.go("events", lambda: self.events.run(stop))
        self.informers.start(stop, supervisor)

    def background(self) -> list[tuple[str, float, Callable[[], None]]]:
        """The plugins' work between rounds (a profile's MigrationController carrying out its
        PodMigrationJobs): ``(name, interval, tick)``, each tick run only while this replica leads."""
        out = []
        for fw in self.frameworks:
            for plugin in fw.plugins.values():
                loop = plugin.background() if isinstance(plugin, BackgroundPlugin) else None
                if loop is not None:
                    interval, tick = loop
                    out.append((f"{fw.profile.name}/{plugin.name}", interval, self._leading(tick)))
        return out

    def _leading(self, tick: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            if self.is_leader():
                tick()

        return run

    def _start_rounds(self, stop: threading.Event, supervisor: Supervisor) -> None:
        heap.settle(collect=False)
        if self.elector is not None:
            elector = self.elector
            supervisor.go("leader-election", lambda: elector.run(stop))
        for name, every, tick in self.background():
            supervisor.every(name, every, tick)
        interval = self.cfg.configuration.interval
        if interval > 0:
            supervisor.every("rounds", interval, self.tick)
            return

        def once() -> None:
            while not stop.is_set() and not self.is_leader():
                stop.wait(0.1)
            if not stop.is_set():
                self.run_round()
                self.events.flush()
                log.info("deschedulingInterval is 0: one round done, exiting")
                stop.set()

        supervisor.go("round", once)

    def components(self) -> list[Component]:
        return [
            FuncComponent(
                "informers",
                self._start_informers,
                self.informers.has_synced,
                self.informers.close,
                must_sync=True,
            ),
            FuncComponent("rounds", self._start_rounds),
        ]

    def close(self) -> None:
        self.api.close()


def describe(registry: Registry, conf: Configuration) -> str:
    """``--list-plugins``: every registered plugin, its source, and where each profile enables it."""
    rows = [("NAME", "SOURCE", "ENABLED")]
    for entry in registry.entries():
        where = [
            f"{p.name}:{point}"
            for p in conf.profiles
            for point in ("deschedule", "balance", "evict", "filter")
            if entry.name in p.enabled(point)
        ]
        rows.append((entry.name, entry.source, ",".join(where) or "-"))
    width = [max(len(r[i]) for r in rows) for i in range(2)]
    return "\n".join(f"{r[0]:<{width[0]}}  {r[1]:<{width[1]}}  {r[2]}" for r in rows)
