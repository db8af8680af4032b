"""``StatesInformer``: the facade the agent and the plugins read (implements :class:`api.StatesReader`).

It wires the pieces by mode. In a cluster: the Node, this node's NodeSLO and NodeMetric are cached by
name, each by the cluster side's shared :class:`~koordshared.kube.informer.Informer`; pods come from the
kubelet (or the API server, by the same informer with ``spec.nodeName``), the NodeMetric status is
reported every interval, and the evictor's Eviction and Event calls go through here. Standalone (no
credentials, or asked): the node is this host, pods are discovered in the cgroup tree, the NodeSLO comes
from a file or the defaults, and the NodeMetric status is written to a local file and served by the
daemon.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.statesinformer import kube
from koordlet.statesinformer.config import InformerConfig
from koordlet.statesinformer.discovery import CgroupDiscovery
from koordlet.statesinformer.eviction import EvictResult
from koordlet.statesinformer.kubelet import KubeletClient, KubeletCredentials
from koordlet.statesinformer.kubeletauth import kubelet_credentials, lean_usable
from koordlet.statesinformer.metrics import InformerMetrics
from koordlet.statesinformer.node import local_node, node_info
from koordlet.statesinformer.nodemetric import StatusBuilder
from koordlet.statesinformer.noderesourcetopology import NodeTopologyInformer, TopologyOptions
from koordlet.statesinformer.nodeslo import NodeSLOStore
from koordlet.statesinformer.pleg import PLEG
from koordlet.statesinformer.pods import (
    APIPodSource,
    KubeletEndpoint,
    KubeletPodSource,
    PodsInformer,
    PodSource,
)
from koordlet.statesinformer.reporter import FILE_NAME, NodeMetricReporter
from koordlet.statesinformer.slofile import NodeSLOFile
from koordlet.system.host import Host
from koordshared.apis.slo.nodemetric import CollectPolicy
from koordshared.kube.client import (
    close_client,
    in_cluster_available,
    make_api_client,
    make_client,
)
from koordshared.kube.informer import EventHandler, Informer
from koordshared.kube.ratelimit import Backoff
from koordshared.kube.transport import LeanClient
from koordshared.runtime.errors import APIUnavailable
from koordshared.runtime.eventbus import EventBus
from koordshared.runtime.lifecycle import Supervisor, until, wait_for

log = logging.getLogger(__name__)

_MISSING_SPEC = "<NodeSLO without a spec>"
NRT_INFORMER = "noderesourcetopologies"
PLEG_IDLE_WAIT = 30.0
"""The PLEG's sleep once every tier is watched (events, the pod list's retries and shutdown wake it)."""


def _api_client(config: InformerConfig) -> Any:
    """The API client: of an explicit ``client_configuration`` (tests, embedding), else the lean client
    of the kubeconfig or service account (no ``kubernetes`` import: some 17 MiB of the DaemonSet's RSS)
    unless the kubeconfig needs the official one, or the kubelet could not be shown its credentials."""
    if config.client_configuration is not None:
        return make_api_client(client_configuration=config.client_configuration, user_agent=config.user_agent)
    api_client = make_client(config.kubeconfig, user_agent=config.user_agent)
    if isinstance(api_client, LeanClient) and not lean_usable(api_client.endpoint):
        close_client(api_client)
        return make_api_client(config.kubeconfig, user_agent=config.user_agent)
    return api_client


class StatesInformer:
    """Node, pods, NodeSLO and NodeMetric for one node; :meth:`start` returns at once."""

    def __init__(
        self,
        config: InformerConfig,
        host: Host,
        cache: MetricCache,
        bus: EventBus,
        registry: CollectorRegistry | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.host = host
        self.cache = cache
        self.bus = bus
        self._clock = clock
        self._wall = wall_clock
        self.metrics = InformerMetrics(registry)
        self.standalone = self._decide_standalone(config)
        self._local_node: api.NodeInfo | None = None
        self._node_cache: tuple[Mapping[str, Any], api.NodeInfo] | None = None
        self._cgroup_listeners: list[Callable[[], None]] = []
        self.nodeslo = NodeSLOStore(
            on_change=lambda: bus.publish(api.EVENT_NODE_SLO_CHANGED), on_invalid=self._nodeslo_invalid
        )
        self.api: kube.ClusterAPI | None = None
        self.informers: dict[str, Informer] = {}
        """Cluster mode: ``node``, ``nodeslos``, ``nodemetrics``, (gate ``NodeTopologyReport``)
        ``noderesourcetopologies`` and (``--pod-source=api``) ``pods``."""
        self.slo_file = NodeSLOFile(config.node_slo_file, self.nodeslo)
        self._kubelet_credentials = KubeletCredentials()
        source: PodSource
        if self.standalone:
            source = CgroupDiscovery(host, config.pod_list, config.kubelet_sync_timeout, clock=clock)
        else:
            api_client = _api_client(config)
            self.api = kube.ClusterAPI(api_client, config.node_name, config.request_timeout_seconds)
            self._kubelet_credentials = kubelet_credentials(
                config,
                api_client.endpoint if isinstance(api_client, LeanClient) else api_client.configuration,
            )
            self._make_informers(self.api)
            if config.pod_source == "api":
                source = APIPodSource(self.informers["pods"])
            else:
                source = KubeletPodSource(self._kubelet_endpoint, user_agent=config.user_agent)
        self.pods_informer = PodsInformer(
            source,
            lambda: host.layout,
            clock=clock,
            staleness=config.staleness,
            on_change=lambda: bus.publish(api.EVENT_PODS_CHANGED),
            on_refresh=lambda ok, n: self.metrics.pods_refresh.labels(result="ok" if ok else "kept").inc(),
        )
        self.metrics.bind(self.pods_informer.degraded, lambda: len(self.pods_informer.pods()))
        if "pods" in self.informers:
            self.informers["pods"].add_handler(
                EventHandler(
                    on_add=lambda _: self._api_pods_changed(),
                    on_update=lambda _old, _new: self._api_pods_changed(),
                    on_delete=lambda _: self._api_pods_changed(),
                )
            )
        self.topology = self._topology_informer()
        self._pleg: PLEG | None = None
        self.builder = StatusBuilder(cache, wall_clock)
        self.reporter = NodeMetricReporter(
            config,
            self._build_status,
            self._node_metric,
            clock=clock,
            metrics=self.metrics,
            sink=self.api,
            file=host.paths.koordlet_run_dir() / FILE_NAME if self.standalone else None,
        )

    def _topology_informer(self) -> NodeTopologyInformer:
        cfg = self.config
        options = TopologyOptions(
            node_name=cfg.node_name,
            sync_interval=cfg.node_topology_sync_interval,
            query_kubelet_config=cfg.query_kubelet_config,
            report=cfg.node_topology_report,
            hugepage_report=cfg.hugepage_report,
        )
        if self.api is None:
            return NodeTopologyInformer(options, self.host, self.node, self.pods)
        kubelet = KubeletClient(self._kubelet_endpoint, user_agent=cfg.user_agent)
        nrt = self.informers.get(NRT_INFORMER)
        return NodeTopologyInformer(
            options,
            self.host,
            self.node,
            self.pods,
            configz=lambda: kubelet.get_json("/configz")[1],
            cached_object=lambda: self._cached(NRT_INFORMER),
            ready=nrt.has_synced if nrt is not None else lambda: False,
            node_uid=self._node_uid,
            sink=self.api,
        )

    def _node_uid(self) -> str:
        obj = self._cached("node")
        return str((obj.get("metadata") or {}).get("uid") or "") if obj is not None else ""

    def _make_informers(self, capi: kube.ClusterAPI) -> None:
        cfg = self.config

        def opts() -> dict[str, Any]:
            return {
                "watch_timeout": float(cfg.watch_timeout_seconds),
                "request_timeout": cfg.request_timeout_seconds,
                "backoff": Backoff(initial=0.2, cap=cfg.max_backoff_seconds),
            }

        self.informers["node"] = capi.node_informer(**opts())
        slo = self.informers["nodeslos"] = capi.custom_informer("nodeslos", **opts())
        slo.add_handler(
            EventHandler(
                on_add=self._nodeslo_changed,
                on_update=lambda _old, new: self._nodeslo_changed(new),
                on_delete=self._nodeslo_deleted,
            )
        )
        self.informers["nodemetrics"] = capi.custom_informer("nodemetrics", **opts())
        if cfg.node_topology_report:
            self.informers[NRT_INFORMER] = capi.custom_informer(NRT_INFORMER, **opts())
        if cfg.pod_source == "api":
            # Back from an outage the watch resumes from its resourceVersion without a re-list: refresh
            # then (not rate limited: once per recovery), so the pods stop being degraded at once.
            self.informers["pods"] = capi.pods_informer(on_health=self._api_pods_health, **opts())

    def _cached(self, name: str) -> Mapping[str, Any] | None:
        """This node's object of informer ``name`` (each is selected by this node's name)."""
        inf = self.informers.get(name)
        return inf.get(self.config.node_name) if inf is not None else None

    @staticmethod
    def _decide_standalone(config: InformerConfig) -> bool:
        if config.standalone is not None:
            return config.standalone
        has_creds = bool(config.client_configuration or config.kubeconfig or in_cluster_available())
        return not has_creds

    # StatesReader --------------------------------------------------------------------------------

    def node(self) -> api.NodeInfo | None:
        if self.standalone:
            if self._local_node is None:
                self._local_node = local_node(self.config.node_name, self.host.paths)
            return self._local_node
        obj = self._cached("node")
        if obj is None:
            return None
        cached = self._node_cache
        # Plugins ask every tick; convert only when the watch delivered a new object.
        if cached is None or cached[0] is not obj:
            cached = self._node_cache = (obj, node_info(obj, self.host.paths))
        return cached[1]

    def pods(self) -> tuple[api.PodInfo, ...]:
        return self.pods_informer.pods()

    def node_slo(self) -> api.NodeSLO:
        return self.nodeslo.current()

    def has_synced(self) -> bool:
        if not self.pods_informer.has_synced():
            return False
        if self.standalone:
            return self.nodeslo.seen
        return self.informers["node"].has_synced() and self.informers["nodeslos"].has_synced()

    def degraded(self) -> bool:
        """The pod list is older than the allowed staleness (pods are kept; acting on them is risky)."""
        return self.pods_informer.degraded()

    # Lifecycle -----------------------------------------------------------------------------------

    def start(self, stop: threading.Event, supervisor: Supervisor) -> None:
        """Start every loop under ``supervisor`` and return at once."""
        cfg = self.config
        if self.api is not None:
            for inf in self.informers.values():
                supervisor.go(f"informer-{inf.name}", functools.partial(inf.run, stop))
        else:
            self.slo_file.check()
            slo_file = self.slo_file
            supervisor.go(
                "informer-nodeslo-file", lambda: slo_file.run(stop, cfg.node_slo_file_check_seconds)
            )
        self._after_node(supervisor, stop, "informer-pods", cfg.kubelet_sync_interval, self._refresh_pods)
        self.topology.refresh_host()  # the runtime hooks read the pools before the first sync
        self._after_node(
            supervisor, stop, "informer-node-topology", cfg.node_topology_sync_interval, self.topology.sync
        )
        if cfg.pleg:
            source = self.pods_informer.source
            pleg = self._pleg = PLEG(
                self.host,
                self._cgroups_changed,
                on_idle=self.pods_informer.retry,
                idle_wait=PLEG_IDLE_WAIT,
                # standalone discovery then lists only the pod dirs an event names
                on_dirs=source.changed if isinstance(source, CgroupDiscovery) else None,
            )
            supervisor.go("informer-pleg", lambda: pleg.run(stop))
        if cfg.enable_node_metric_report:
            supervisor.go("informer-nodemetric", lambda: self.reporter.run(stop))

    def _after_node(
        self, supervisor: Supervisor, stop: threading.Event, name: str, period: float, fn: Callable[[], None]
    ) -> None:
        """Run ``fn`` every ``period`` once the kubelet can be found: its address and port are the Node's,
        so a loop that asks the kubelet starts once the Node is in the cache (as koordlet makes its
        kubelet stub from the synced Node), not against a default port before it."""

        def loop() -> None:
            if wait_for(self._kubelet_known, stop, timeout=math.inf):
                until(fn, period, stop, name=name)

        supervisor.go(name, loop)

    def _kubelet_known(self) -> bool:
        """Whether the kubelet's address and port are known: always standalone; in a cluster once the
        Node is in the cache (koordlet's node informer counts as synced only then)."""
        return self.api is None or self._cached("node") is not None

    def on_cgroups_changed(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` after each PLEG event, once the pod list it asked for is in (the runtime hooks retry
        writes to cgroup dirs that did not exist at their last pass)."""
        self._cgroup_listeners.append(fn)

    def _cgroups_changed(self) -> None:
        if self._kubelet_known():
            self.pods_informer.kick()
        for fn in self._cgroup_listeners:
            fn()

    def _refresh_pods(self) -> None:
        self.pods_informer.refresh()

    def shutdown(self) -> None:
        """Cut open watches so their threads end promptly (the loops themselves end on ``stop``)."""
        for inf in self.informers.values():
            inf.close()
        if self.api is not None:
            self.api.close()
        if self._pleg is not None:
            self._pleg.close()
        self.slo_file.close()

    # NodeSLO / NodeMetric ----------------------------------------------------------------------

    def _nodeslo_changed(self, obj: Mapping[str, Any]) -> None:
        spec = obj.get("spec")
        self.nodeslo.apply(spec if spec is not None else _MISSING_SPEC)

    def _nodeslo_deleted(self, _obj: Mapping[str, Any]) -> None:
        self.nodeslo.apply(None)  # no NodeSLO: Koordinator's defaults

    def _nodeslo_invalid(self, why: str) -> None:
        self.metrics.nodeslo_invalid.inc()
        node = self._cached("node")
        uid = str((node.get("metadata") or {}).get("uid", "")) if node is not None else ""
        self.record_event("Node", "", self.config.node_name, uid, "Warning", "NodeSLOInvalid", why)

    def _node_metric(self) -> Mapping[str, Any] | None:
        if self.standalone:
            return None  # no NodeMetric object: koordlet's defaults and the configured interval
        return self._cached("nodemetrics")

    def _build_status(self, policy: CollectPolicy) -> dict[str, Any]:
        return self.builder.build(policy, self.pods(), self.node_slo().host_applications)

    def nodemetric_status(self) -> dict[str, Any]:
        """The NodeMetric ``status`` as of now (served at ``/nodemetric``)."""
        return self._build_status(self.reporter.policy())

    # Pods ----------------------------------------------------------------------------------------

    def _api_pods_changed(self) -> None:
        # The initial list's adds come before the informer counts as synced (and the source would
        # refuse): the health hook refreshes once right after it.
        if self.informers["pods"].has_synced():
            self.pods_informer.kick()

    def _api_pods_health(self, healthy: bool) -> None:
        if healthy:
            self.pods_informer.refresh()

    def _kubelet_endpoint(self) -> KubeletEndpoint:
        cfg = self.config
        if not self._kubelet_known():
            # A PLEG kick can come before the Node is seen: no guess at a default port.
            raise APIUnavailable("kubelet: its address and port are not known before the Node is seen")
        address, port = cfg.kubelet_address, cfg.kubelet_port
        obj = self._cached("node")
        status = (obj.get("status") or {}) if obj is not None else {}
        if not address:
            for addr in status.get("addresses") or ():
                if isinstance(addr, Mapping) and addr.get("type") == cfg.kubelet_preferred_address_type:
                    address = str(addr.get("address", ""))
                    break
        if not port:
            endpoint = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
            port = endpoint if isinstance(endpoint, int) and endpoint > 0 else 10250
        return KubeletEndpoint(
            address=address or "127.0.0.1",
            port=port,
            insecure=cfg.kubelet_insecure_tls,
            read_only_port=cfg.kubelet_read_only_port,
            credentials=self._kubelet_credentials,
            ca_file=cfg.kubelet_ca_file,
            timeout=cfg.kubelet_sync_timeout,
        )

    # For the evictor ------------------------------------------------------------------------------

    def evict(self, pod: api.PodInfo, reason: str, message: str) -> EvictResult:
        """policy/v1 Eviction with a UID precondition: ``evicted``, ``blocked`` (429), ``gone`` (404),
        ``conflict`` (409) or ``error`` (also in standalone mode, where there is no API)."""
        if self.api is None:
            return EvictResult.ERROR
        result = self.api.evict(pod.namespace, pod.name, pod.uid)
        log.info("evict %s/%s (%s): %s: %s", pod.namespace, pod.name, reason, result.value, message)
        if result is EvictResult.EVICTED:
            self.record_event(
                "Pod", pod.namespace, pod.name, pod.uid, "Warning", "Evicted", f"{reason}: {message}"
            )
        return result

    def record_event(
        self, kind: str, namespace: str, name: str, uid: str, type: str, reason: str, message: str
    ) -> bool:
        """A core/v1 Event, best effort (False when it could not be recorded or in standalone mode)."""
        if self.api is None:
            log.info("event %s %s/%s %s: %s", type, namespace, name, reason, message)
            return False
        return self.api.create_event(kind, namespace, name, uid, type, reason, message, self._wall())
