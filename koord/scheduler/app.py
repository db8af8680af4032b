"""The koord-scheduler process: the informers, the cache, the profiles' frameworks and the scheduler on
the shared lifecycle, under Lease leader election. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from prometheus_client import CollectorRegistry

from koord.scheduler.cache.cache import Cache
from koord.scheduler.config import SchedulerConfiguration
from koord.scheduler.core.api import ClusterAPI, FencedAPI, KubeAPI
from koord.scheduler.core.eventhandlers import EventHandlers
from koord.scheduler.core.handle import SchedulerHandle
from koord.scheduler.core.metrics import SchedulerMetrics
from koord.scheduler.core.scheduler import Scheduler, SchedulingOptions
from koord.scheduler.framework import verdicts
from koord.scheduler.framework.extension import FailureHooks, plugin_controllers
from koord.scheduler.framework.runtime import Framework
from koord.scheduler.framework.snapshot import Snapshot
from koord.scheduler.framework.waiting import WaitingPods
from koord.scheduler.plugins import plugin_registry
from koordshared import __version__
from koordshared.apis.core.pod import index_by_owner
from koordshared.kube.client import close_client, make_client, throttle, twin_client
from koordshared.kube.eventsv1 import EventBroadcaster
from koordshared.kube.informers import InformerSet, Watch, cluster_watches
from koordshared.kube.leaderelection import ElectionConfig, KubeLeaseClient, LeaderElector
from koordshared.kube.process import Address
from koordshared.kube.ratelimit import TokenBucket
from koordshared.runtime import heap
from koordshared.runtime.errors import ConfigError
from koordshared.runtime.lifecycle import Component, FuncComponent, Supervisor
from koordshared.runtime.pluginregistry import EntryPoints, Registry

log = logging.getLogger(__name__)

USER_AGENT = "koord-scheduler"


@dataclass(frozen=True, slots=True)
class KoordSchedulerConfig:
    """The process's configuration: the file's, with the flags applied."""

    addr: Address
    configuration: SchedulerConfiguration
    kubeconfig: str = ""
    leader_election: bool = True
    election: ElectionConfig = field(default_factory=ElectionConfig)
    request_timeout: float = 3.0
    sync_timeout: float = 60.0


ASSIGNED_THEN_PENDING = ("spec.nodeName!=", "spec.nodeName=")
"""The pods' list in two parts: every assigned pod is counted before the first binding (no node is
overcommitted by the scheduler's own bookkeeping), while scheduling starts with the first page of pending
pods instead of the last."""


def watches() -> list[Watch]:
    """Nodes and every pod that holds resources (indexed by node and workload; the pending ones are the
    queue's); plugins add the caches they need (NodeMetrics for LoadAwareScheduling...) through the
    handle, so a cluster without Koordinator's CRDs runs a profile that does not need them."""
    nodes, pods, _ = cluster_watches(pod_indexers={"owner": index_by_owner}, keep_volume_kinds=True)
    return [nodes, replace(pods, list_parts=ASSIGNED_THEN_PENDING)]


def limited(api_client: Any, conf: SchedulerConfiguration) -> None:
    """Hold ``api_client``'s requests to ``clientConnection``'s qps/burst (a negative qps: no limit)."""
    if conf.qps > 0:
        throttle(api_client, TokenBucket(conf.qps, max(conf.burst, 1), time.monotonic))


def build_frameworks(
    configuration: SchedulerConfiguration,
    registry: Registry,
    handle: Any,
    metrics: SchedulerMetrics | None = None,
) -> dict[str, Framework]:
    """One framework per profile (timed into ``metrics``); every profile must sort its queue with the
    same plugin."""
    timer = metrics.plugin if metrics is not None else None
    point_timer = metrics.point if metrics is not None else None
    frameworks = {
        p.scheduler_name: Framework(p, registry, handle, timer=timer, point_timer=point_timer, complete=True)
        for p in configuration.profiles
    }
    sorts = {tuple(e.name for e in fw.points["queueSort"]) for fw in frameworks.values()}
    if len(sorts) > 1:
        raise ConfigError(
            f"profiles: every profile must use the same queueSort plugin, found {sorted(sorts)}"
        )
    return frameworks


class KoordScheduler:
    def __init__(
        self,
        cfg: KoordSchedulerConfig,
        registry: CollectorRegistry,
        *,
        api_client: Any = None,
        informers: Any = None,
        api: ClusterAPI | None = None,
        entry_points: EntryPoints | None = None,
        clock: Callable[[], float] = time.time,
        seed: int | None = None,
    ) -> None:
        self.cfg = cfg
        conf = cfg.configuration
        self.plugins = plugin_registry(entry_points)
        identity = cfg.election.identity if cfg.leader_election else "no-election"
        self.api_client = api_client or make_client(
            cfg.kubeconfig, user_agent=f"{USER_AGENT}/{__version__} ({identity})"
        )
        # kube-scheduler's two clientsets: one for the API calls and the informers, one for Events, each
        # held to clientConnection's qps/burst, so a backlog of Events never delays a binding.
        self.events_client = twin_client(self.api_client)
        limited(self.api_client, conf)
        limited(self.events_client, conf)
        self.informers: Any = informers or InformerSet(
            self.api_client, watches(), request_timeout=cfg.request_timeout
        )
        self.events = EventBroadcaster(self.events_client, request_timeout=cfg.request_timeout)
        self._stopping = threading.Event()
        self._elect_stop = threading.Event()
        names = [p.scheduler_name for p in conf.profiles]
        inner = api or KubeAPI(self.api_client, self.events, cfg.request_timeout, names)
        self.api = FencedAPI(inner, self.may_write)
        self.metrics = SchedulerMetrics(registry)
        self.registry = registry
        self.snapshot = Snapshot()
        self.cache = Cache()
        self.waiting = WaitingPods()
        hooks = FailureHooks()
        self.handle = SchedulerHandle(
            self.snapshot,
            self.informers,
            self.api,
            self.waiting,
            client=self.api_client,
            clock=clock,
            hooks=hooks,
        )
        frameworks = build_frameworks(conf, self.plugins, self.handle, self.metrics)
        self.scheduler = Scheduler(
            frameworks,
            self.api,
            self.metrics,
            cache=self.cache,
            snapshot=self.snapshot,
            waiting=self.waiting,
            pods=self.informers["pods"],
            options=SchedulingOptions(
                percentage_of_nodes_to_score=conf.percentage_of_nodes_to_score,
                pod_initial_backoff_seconds=conf.pod_initial_backoff_seconds,
                pod_max_backoff_seconds=conf.pod_max_backoff_seconds,
                parallelism=conf.parallelism,
            ),
            hooks=hooks,
            seed=seed,
        )
        EventHandlers(self.scheduler).attach(self.informers["pods"], self.informers["nodes"])
        self.controllers = plugin_controllers(fw.instances for fw in frameworks.values())
        self.elector: LeaderElector | None = None
        if cfg.leader_election:
            lease = KubeLeaseClient(self.api_client, cfg.election.namespace, cfg.election.name)
            self.elector = LeaderElector(cfg.election, lease)
        self.is_leader: Callable[[], bool] = self.elector.is_leader if self.elector else (lambda: True)

    # ---- lifecycle ------------------------------------------------------------------------------

    def _start_informers(self, stop: threading.Event, supervisor: Supervisor) -> None:
        heap.hold()  # until the caches are synced (:meth:`_start_scheduling`)
        supervisor.go("events", lambda: self.events.run(stop))
        self.informers.start(stop, supervisor)

    def may_write(self) -> bool:
        return not self._stopping.is_set() and self.is_leader()

    def _start_scheduling(self, stop: threading.Event, supervisor: Supervisor) -> None:
        # No full collection here: the first binding would wait on it, and the lists leave next to no
        # garbage (decoded JSON holds no cycles). The first generation's threshold is put back: with the
        # heap frozen its passes see only what the cycles made.
        heap.settle(collect=False)
        if self.elector is not None:
            elector = self.elector
            # Its own stop: the Lease is released only once the writes of this replica are over.
            supervisor.go("leader-election", lambda: elector.run(self._elect_stop))
        supervisor.go("scheduling", lambda: self.loop(stop))
        supervisor.go("queue-flush", lambda: self.scheduler.queue.run(stop))
        for c in self.controllers:
            # Plugins' controllers write to the API server: only the leader's run (Koordinator starts them
            # once elected).
            supervisor.every(f"controller-{c.name}", c.period, self._while_leading(c.sync))

    def _while_leading(self, fn: Callable[[], None]) -> Callable[[], None]:
        def tick() -> None:
            if self.is_leader():
                fn()

        return tick

    def loop(self, stop: threading.Event) -> None:
        """Schedule while leading; a replica that loses the lead stops here and the process exits."""
        led = False
        while not stop.is_set():
            if not self.is_leader():
                if led:
                    raise RuntimeError(
                        "leadership lost: stopping (a restarted replica follows the new leader)"
                    )
                stop.wait(0.1)
                continue
            if not led:
                log.info("leading: scheduling pods of profiles %s", ", ".join(self.scheduler.profiles))
                led = True
            self.scheduler.schedule_next(timeout=0.2)

    def components(self) -> list[Component]:
        return [
            FuncComponent(
                "informers",
                self._start_informers,
                self.informers.has_synced,
                self._close_informers,
                must_sync=True,
            ),
            FuncComponent("scheduling", self._start_scheduling, shutdown_fn=self._stop_scheduling),
        ]

    def _stop_scheduling(self) -> None:
        self._stopping.set()
        try:
            self.scheduler.stop()
            if not self.api.drain(self.cfg.request_timeout + 1.0):
                log.warning("writes still under way at stop; the Lease is released anyway")
        finally:
            self._elect_stop.set()

    def _close_informers(self) -> None:
        self.informers.close()

    def close(self) -> None:
        close_client(self.api_client)
        close_client(self.events_client)

    # ---- explain --------------------------------------------------------------------------------

    def explain(self, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        """``/debug/explain?pod=<ns>/<name>[&node=<node>]``: every plugin's verdict and score per node."""
        key = (query.get("pod") or [""])[0]
        if key.count("/") != 1:
            return 400, "text/plain; charset=utf-8", b"give pod=<namespace>/<name>\n"
        pod = self.informers["pods"].get(key)
        if pod is None:
            return 404, "text/plain; charset=utf-8", f"pod {key} is not in the scheduler's cache\n".encode()
        fw = self.scheduler.framework_for(pod)
        if fw is None:
            return (
                409,
                "text/plain; charset=utf-8",
                f"pod {key} is not for koord-scheduler's profiles\n".encode(),
            )
        with self.scheduler.cycle_lock:
            self.cache.update_snapshot(self.snapshot)
            nodes = self.snapshot.node_infos()
            names = query.get("node") or [ni.name for ni in nodes]
            docs = verdicts.explain(fw, pod, nodes, names)
        body = {"pod": key, "profile": fw.profile.scheduler_name, "nodes": docs}
        return 200, "application/json", json.dumps(body, indent=1, default=str).encode() + b"\n"


def check(configuration: SchedulerConfiguration, registry: Registry) -> dict[str, Framework]:
    """Build every profile over empty caches: unknown plugins and bad args fail here (``--list-plugins``
    and the start)."""
    from koord.scheduler.core.api import MemoryAPI
    from koordshared.kube.informers import MemoryInformerSet

    handle = SchedulerHandle(Snapshot(), MemoryInformerSet(watches()), MemoryAPI(), WaitingPods())
    return build_frameworks(configuration, registry, handle)
