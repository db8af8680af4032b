"""koord-manager wired: shared informers, the config cache, three controllers, leader election, HTTP.

Informers (nodes, NodeMetrics, NodeSLOs, the ``slo-controller-config`` ConfigMap, and pods when the
noderesource controller runs) are shared by the controllers; their handlers only enqueue node names.
Start order: informers (waited for until listed) -> config cache -> election and controller workers.
Only the leader's workers run; on becoming leader every node and every orphan candidate is enqueued,
so nothing is missed while another replica led. A standby replica keeps its caches warm and is ready.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from koord.manager.config import ManagerConfig
from koord.manager.configcache import SLOConfigCache
from koord.manager.controller import Controller, Writer
from koord.manager.metrics import ManagerMetrics
from koord.manager.nodeowned import (
    NodeOwnedReconciler,
    generation_changed,
    node_changed,
    nodemetric_spec,
    nodeslo_spec,
)
from koord.manager.noderesource import CONTROLLER as NODERESOURCE
from koord.manager.noderesource import NodeResourceReconciler
from koord.manager.webhook.server import WebhookServer
from koordshared import __version__
from koordshared.apis.meta import groups
from koordshared.kube.client import make_api_client
from koordshared.kube.events import EventRecorder
from koordshared.kube.informer import EventHandler, Informer, index_by_node, object_key
from koordshared.kube.informers import InformerSet, Watch
from koordshared.kube.leaderelection import KubeLeaseClient, LeaderElector
from koordshared.runtime import heap
from koordshared.runtime.lifecycle import Component, FuncComponent, Supervisor

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]


def _status_changed(old: Obj, new: Obj) -> bool:
    return old.get("status") != new.get("status")


def _capacity_changed(old: Obj, new: Obj) -> bool:
    o, n = old.get("status") or {}, new.get("status") or {}
    return bool(o.get("capacity") != n.get("capacity") or o.get("allocatable") != n.get("allocatable"))


class Manager:
    def __init__(
        self,
        cfg: ManagerConfig,
        registry: CollectorRegistry,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:

        self.cfg = cfg
        self.metrics = ManagerMetrics(registry)
        user_agent = f"koord-manager/{__version__} ({cfg.election.identity or 'no-election'})"
        self.api_client = make_api_client(cfg.kubeconfig, cfg.client_configuration, user_agent=user_agent)
        watches = [
            Watch("nodes", groups.NODES),
            Watch("nodemetrics", groups.NODE_METRICS),
            Watch("nodeslos", groups.NODE_SLOS),
            Watch(
                "configmaps",
                groups.CONFIG_MAPS,
                groups.named(cfg.slo_config_name),
                namespace=cfg.config_namespace,
            ),
        ]
        if NODERESOURCE in cfg.controllers:
            watches.append(Watch("pods", groups.PODS, indexers={"node": index_by_node}))
        self.informers = InformerSet(
            self.api_client, watches, watch_timeout=cfg.watch_timeout, request_timeout=cfg.request_timeout
        )
        self.nodes = self.informers["nodes"]
        self.nodemetrics = self.informers["nodemetrics"]
        self.nodeslos = self.informers["nodeslos"]
        self.configmaps = self.informers["configmaps"]
        self.pods: Informer | None = self.informers["pods"] if NODERESOURCE in cfg.controllers else None

        self.recorder = EventRecorder(self.api_client, "koord-manager", request_timeout=cfg.request_timeout)
        self.elector: LeaderElector | None = None
        if cfg.leader_election:
            lease = KubeLeaseClient(self.api_client, cfg.election.namespace, cfg.election.name)
            self.elector = LeaderElector(cfg.election, lease, on_started_leading=self.enqueue_everything)
        self.is_leader: Callable[[], bool] = self.elector.is_leader if self.elector else (lambda: True)
        self.metrics.bind_leader(self.is_leader)

        self.controllers: dict[str, Controller] = {}
        self.config = SLOConfigCache(
            recorder=self.recorder,
            on_colocation_change=lambda: self._enqueue_nodes("nodemetric", NODERESOURCE),
            on_nodeslo_change=lambda: self._enqueue_nodes("nodeslo"),
            on_refused=lambda key: self.metrics.config_errors.labels(key=key).inc(),
        )
        self.noderesource: NodeResourceReconciler | None = None
        for name in cfg.controllers:
            writer = Writer(self.api_client, name, self.metrics, self.is_leader, cfg.request_timeout)
            reconcile: Callable[[str], float | None]
            if name == "nodemetric":
                spec = nodemetric_spec(self.config)
                reconcile = NodeOwnedReconciler(
                    name,
                    groups.NODE_METRICS,
                    self.nodes,
                    self.nodemetrics,
                    spec,
                    writer,
                    self.metrics,
                )
            elif name == "nodeslo":
                spec = nodeslo_spec(self.config)
                reconcile = NodeOwnedReconciler(
                    name, groups.NODE_SLOS, self.nodes, self.nodeslos, spec, writer, self.metrics
                )
            else:
                assert self.pods is not None
                self.noderesource = NodeResourceReconciler(
                    self.nodes,
                    self.nodemetrics,
                    self.pods,
                    self.config,
                    writer,
                    self.metrics,
                    clock=clock,
                    wall_clock=wall_clock,
                )
                reconcile = self.noderesource
            self.controllers[name] = Controller(
                name, reconcile, self.metrics, is_leader=self.is_leader, workers=cfg.workers
            )
        self.webhook: WebhookServer | None = None
        if cfg.webhook is not None:
            self.webhook = WebhookServer(self.api_client, cfg.webhook, cfg.request_timeout)
        self._wire_handlers()

    # ---- event routing ----------------------------------------------------------------------------

    def _enqueue(self, controllers: tuple[str, ...], obj: Obj) -> None:
        key = object_key(obj)
        for name in controllers:
            ctl = self.controllers.get(name)
            if ctl is not None:
                ctl.enqueue(key)

    def _enqueue_nodes(self, *controllers: str) -> None:
        keys = self.nodes.keys()
        for name in controllers:
            ctl = self.controllers.get(name)
            if ctl is not None:
                ctl.enqueue_all(keys)

    def enqueue_everything(self) -> None:
        """Every node, and every NodeMetric/NodeSLO (a deleted node's object is an orphan to remove)."""
        self._enqueue_nodes(*self.controllers)
        for name, inf in (("nodemetric", self.nodemetrics), ("nodeslo", self.nodeslos)):
            ctl = self.controllers.get(name)
            if ctl is not None:
                ctl.enqueue_all(inf.keys())

    def _forget_node(self, obj: Obj) -> None:
        if self.noderesource is not None:
            self.noderesource.forget(object_key(obj))

    def _wire_handlers(self) -> None:
        owned = ("nodemetric", "nodeslo")
        everyone = (*owned, NODERESOURCE)

        def node_update(old: Obj, new: Obj) -> None:
            if node_changed(old, new):
                self._enqueue(everyone, new)
            elif _capacity_changed(old, new):
                self._enqueue((NODERESOURCE,), new)

        def node_delete(obj: Obj) -> None:
            self._forget_node(obj)
            self._enqueue(everyone, obj)

        self.nodes.add_handler(EventHandler(lambda o: self._enqueue(everyone, o), node_update, node_delete))

        def nodemetric_update(old: Obj, new: Obj) -> None:
            if generation_changed(old, new):
                self._enqueue(("nodemetric",), new)
            if _status_changed(old, new):
                self._enqueue((NODERESOURCE,), new)

        def nodemetric_delete(obj: Obj) -> None:
            self._forget_node(obj)
            self._enqueue(("nodemetric", NODERESOURCE), obj)

        self.nodemetrics.add_handler(
            EventHandler(lambda o: self._enqueue(("nodemetric",), o), nodemetric_update, nodemetric_delete)
        )

        def nodeslo_update(old: Obj, new: Obj) -> None:
            if generation_changed(old, new):
                self._enqueue(("nodeslo",), new)

        self.nodeslos.add_handler(
            EventHandler(
                lambda o: self._enqueue(("nodeslo",), o),
                nodeslo_update,
                lambda o: self._enqueue(("nodeslo",), o),
            )
        )
        # A ConfigMap delete is ignored: the last config stays in force (Koordinator).
        self.configmaps.add_handler(EventHandler(self.config.sync, lambda _old, new: self.config.sync(new)))

    # ---- lifecycle -----------------------------------------------------------------------------------

    def _start_informers(self, stop: threading.Event, supervisor: Supervisor) -> None:
        heap.hold()  # until the caches are synced (:meth:`_start_controllers`)
        supervisor.go("events", lambda: self.recorder.run(stop))
        for inf in self.informers:
            supervisor.go(f"informer-{inf.name}", lambda inf=inf: inf.run(stop))  # type: ignore[misc]

    def informers_synced(self) -> bool:
        return all(inf.has_synced() for inf in self.informers)

    def _start_controllers(self, stop: threading.Event, supervisor: Supervisor) -> None:
        heap.settle(collect=False)
        if not self.config.available:
            self.config.sync(None)  # no ConfigMap: Koordinator's defaults (colocation in error status)
        for ctl in self.controllers.values():
            ctl.start(stop, supervisor)
        if self.elector is not None:
            elector = self.elector
            supervisor.go("leader-election", lambda: elector.run(stop))
        else:
            self.enqueue_everything()
        if self.cfg.sync_period > 0:
            supervisor.every("resync", self.cfg.sync_period, self._resync)

    def _resync(self) -> None:
        if self.is_leader():
            self.enqueue_everything()

    def _shutdown_controllers(self) -> None:
        for ctl in self.controllers.values():
            ctl.shutdown()

    def _shutdown_informers(self) -> None:
        for inf in self.informers:
            inf.close()

    def components(self) -> list[Component]:
        return [
            FuncComponent(
                "informers",
                self._start_informers,
                self.informers_synced,
                self._shutdown_informers,
                must_sync=True,
            ),
            *([self.webhook] if self.webhook is not None else []),
            FuncComponent("controllers", self._start_controllers, shutdown_fn=self._shutdown_controllers),
        ]

    def close(self) -> None:
        self.api_client.close()
