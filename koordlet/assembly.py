"""Builds the agent from its configuration: every component, wired, in koordlet's start order.

This is the one place that knows every concrete class. The daemon only sees components; plugins only see
``koordlet.api``. Host paths, clocks and the Prometheus registry are created here and injected.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.config import Configuration
from koordlet.daemon import Daemon, FuncComponent
from koordlet.errors import ConfigError
from koordlet.featuregates import FeatureGate
from koordlet.httpserver import AgentHTTPServer, Route, json_response
from koordlet.metriccache.cache import MetricCache
from koordlet.metriccache.config import MetricCacheConfig
from koordlet.metrics import AgentMetrics, PluginMetrics
from koordlet.qosmanager.evictor import Evictor
from koordlet.qosmanager.loader import PluginEntry
from koordlet.qosmanager.manager import QOSManager, Services
from koordlet.resourceexecutor.executor import ExecutorConfig, ResourceExecutor
from koordlet.runtime import EventBus, Supervisor
from koordlet.system import native
from koordlet.system.host import Host

log = logging.getLogger(__name__)


def _events_route(executor: ResourceExecutor) -> Route:
    def route(query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        try:
            since = int(query.get("since", ["0"])[0])
            limit = int(query.get("limit", ["256"])[0])
        except ValueError:
            return json_response({"error": "since and limit must be integers"}, 400)
        return json_response({"events": executor.events(since_seq=since, limit=limit)})

    return route


def build_daemon(
    cfg: Configuration,
    entries: Sequence[PluginEntry],
    gates: FeatureGate,
    ext_gates: FeatureGate,
    stop: threading.Event,
) -> Daemon:
    """Construct the whole agent (nothing starts until ``Daemon.run``)."""
    from koordlet.metricsadvisor.advisor import AdvisorConfig, MetricsAdvisor
    from koordlet.statesinformer.config import InformerConfig
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
        config=ExecutorConfig(
            force_update_seconds=cfg.force_update_seconds,
            dry_run=cfg.dry_run,
            audit_size=cfg.audit_max_events,
        ),
        clock=clock,
        wall_clock=wall,
        registry=registry,
        mode=host.mode,
    )
    cache = MetricCache(
        MetricCacheConfig(
            tsdb_path=Path(cfg.tsdb_path) if cfg.tsdb_path else None,
            tsdb_max_bytes=cfg.tsdb_max_bytes,
            collect_interval=cfg.collect_interval,
        ),
        clock=clock,
        wall_clock=wall,
        registry=registry,
    )
    informer = StatesInformer(
        InformerConfig(
            node_name=cfg.node_name,
            standalone=True if cfg.standalone else None,
            kubeconfig=cfg.kubeconfig,
            kubelet_preferred_address_type=cfg.kubelet_preferred_address_type,
            kubelet_read_only_port=cfg.kubelet_read_only_port,
            kubelet_insecure_tls=cfg.kubelet_insecure_tls,
            kubelet_sync_interval=cfg.kubelet_sync_interval,
            kubelet_sync_timeout=cfg.kubelet_sync_timeout,
            pod_list=cfg.pod_list,
            node_slo_file=cfg.node_slo_file,
            enable_node_metric_report=cfg.enable_node_metric_report,
        ),
        host,
        cache,
        bus,
        registry,
        clock=clock,
        wall_clock=wall,
    )
    advisor = MetricsAdvisor(
        AdvisorConfig.from_configuration(cfg),
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
        only_by_api=cfg.only_evict_by_api,
        eviction_api=None if informer.standalone else informer,
        dry_run=cfg.dry_run,
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
        agent=api.AgentOptions(
            reconcile_interval=cfg.reconcile_interval, collect_interval=cfg.collect_interval
        ),
        dry_run=cfg.dry_run,
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
            max(cfg.force_update_seconds / 4, 1.0),
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
