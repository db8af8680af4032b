"""The agent in one place: :func:`new_daemon` builds every component, :meth:`Daemon.run` runs them.

koordlet's ``NewDaemon`` + ``Run``. This is the one module that knows every concrete class; each component
gets its own frozen config from :class:`koordlet.config.Configuration`, plugins see only ``koordlet.api``.
Start order: resource executor → metric cache → states informer (wait for sync) → metrics advisor (wait for
first samples) → QoS manager (plugins) → ready. ``/healthz`` answers as soon as the HTTP server is up;
``/readyz`` only once the whole order has completed. A root component that dies sets ``stop`` and the process
exits non-zero so the kubelet restarts it; stop runs the order backwards. That run machinery
(:class:`~koordshared.runtime.lifecycle.Daemon`) is :mod:`koordshared.runtime.lifecycle`'s, shared with the
cluster processes, which must not import the agent's components.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from koordlet import api, memprofile
from koordlet.agentstatus import StatusSources, status_route
from koordlet.config import Configuration, split_address
from koordlet.featuregates import FeatureGate
from koordlet.metriccache.cache import MetricCache
from koordlet.metrics import AgentMetrics, PluginMetrics, ProcessMetrics
from koordlet.metricsadvisor.fastsampler import FastSampling
from koordlet.prediction.checkpoint import Checkpointer
from koordlet.prediction.server import PeakPredictServer
from koordlet.qosmanager.evictor import Evictor
from koordlet.qosmanager.loader import PluginEntry
from koordlet.qosmanager.manager import QOSManager, Services
from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.runtimehooks.metrics import HookMetrics
from koordlet.runtimehooks.service import RuntimeHooks, hooks_for
from koordlet.system import coresched, malloc, native
from koordlet.system.host import Host
from koordlet.system.sysctl import get_sysctl
from koordshared.runtime import cpuprofile
from koordshared.runtime.errors import ConfigError
from koordshared.runtime.eventbus import EventBus
from koordshared.runtime.httpaccess import DelegatingAuth, serving_from_options, ssl_context
from koordshared.runtime.httpserver import ProcessHTTPServer, Route, json_response
from koordshared.runtime.lifecycle import Daemon, FuncComponent, Supervisor

if TYPE_CHECKING:
    from koordlet.statesinformer.informer import StatesInformer

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


def _http_server(cfg: Configuration, registry: CollectorRegistry, *, standalone: bool) -> ProcessHTTPServer:
    """The endpoint with ``--tls-*`` and the callers' review from ``--authentication-token-webhook`` and
    ``--authorization-mode``; a standalone agent has no API server to review callers with."""
    serving = serving_from_options(cfg.options)
    auth: DelegatingAuth | None = None
    if serving.auth.enabled:
        if standalone:
            raise ConfigError(
                "--authentication-token-webhook reviews callers with the API server, which a standalone "
                "agent has none of: bind --addr to 127.0.0.1 instead, or run in the cluster"
            )
        from koordshared.kube.delegation import delegating_auth

        auth = delegating_auth(serving.auth, cfg.informer.kubeconfig, user_agent=cfg.informer.user_agent)
    tls = ssl_context(serving.tls) if serving.tls is not None else None
    return ProcessHTTPServer(cfg.host, cfg.port, registry, tls=tls, auth=auth)


def _runtime_hooks(
    cfg: Configuration,
    gates: FeatureGate,
    informer: StatesInformer,
    host: Host,
    executor: ResourceExecutor,
    bus: EventBus,
    registry: CollectorRegistry,
) -> RuntimeHooks:
    """The runtime hooks the gates turn on, told when pods, cgroups and the NodeSLO change."""
    bvt = (
        host.supports("cpu.bvt_warp_ns")
        or get_sysctl("sched_group_identity_enabled").path(host.paths).exists()
    )
    core_sched_why = coresched.probe()
    if core_sched_why is None:
        executor.procs.sched_core = coresched.KernelSchedCore()
    metrics = HookMetrics(registry, cfg.node_name)
    hooks = RuntimeHooks(
        dataclasses.replace(
            cfg.hooks, enabled=hooks_for(gates.enabled), be_cpu_manager=gates.enabled("BECPUManager")
        ),
        informer,
        host,
        executor,
        informer.topology.status,
        procs=executor.procs,
        guard=(host.paths, host.mode),
        group_identity_why=None if bvt else "this kernel has no cpu.bvt_warp_ns (Alibaba Cloud Linux/Anolis)",
        core_sched_why=core_sched_why,
        on_pass=metrics.reconciled,
        on_hook=metrics.hook,
        refresh_pods=informer.pods_informer.kick,
    )
    bus.subscribe(api.EVENT_PODS_CHANGED, hooks.reconciler.pods_changed, owner="runtimehooks")
    bus.subscribe(api.EVENT_NODE_SLO_CHANGED, hooks.reconciler.rule_changed, owner="runtimehooks")
    informer.on_cgroups_changed(hooks.reconciler.pods_changed)
    return hooks


def new_daemon(
    cfg: Configuration,
    entries: Sequence[PluginEntry],
    gates: FeatureGate,
    ext_gates: FeatureGate,
    stop: threading.Event,
) -> Daemon:
    """Build the whole agent, each component from its own config in ``cfg`` (nothing starts until
    :meth:`Daemon.run`). Host paths, clocks and the Prometheus registry are made here and injected."""
    # Imported here: the informer pulls in the API client, which `koordlet version` never needs.
    from koordlet.metricsadvisor.advisor import MetricsAdvisor
    from koordlet.statesinformer.informer import StatesInformer
    from koordlet.statesinformer.metrics import NodeMetricGauges

    malloc.tune()  # before the first thread: arenas and mmap threshold (koordlet.system.malloc)
    clock, wall = time.monotonic, time.time
    registry = CollectorRegistry(auto_describe=False)
    ProcessMetrics(registry)  # process_cpu_seconds_total etc., as Go's koordlet exposes: its cost
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
        dataclasses.replace(
            cfg.informer,
            node_topology_report=gates.enabled("NodeTopologyReport"),
            hugepage_report=gates.enabled("HugePageReport"),
        ),
        host,
        cache,
        bus,
        registry,
        clock=clock,
        wall_clock=wall,
    )
    # Fast node samples only while a plugin asks for them (the suppress plugin: BE busy near its budget).
    fast_sampling = FastSampling()
    advisor = MetricsAdvisor(
        dataclasses.replace(
            cfg.advisor,
            cpi_enabled=gates.enabled("CPICollector"),
            resctrl_enabled=cfg.advisor.resctrl_enabled and gates.enabled("ResctrlCollector"),
        ),
        host=host,
        cache=cache,
        states=informer,
        bus=bus,
        registry=registry,
        clock=clock,
        fast_sampling=fast_sampling,
    )
    # The builder reports what it says as koordlet's gauges, and the prod prediction (Koordinator's
    # predict server, trained every minute from the cache) fills prodReclaimableMetric/prodPeakMetric.
    informer.builder.gauges = NodeMetricGauges(
        registry, cfg.node_name, usages=gates.enabled("NodeMetricPromMetrics")
    )
    prediction = PeakPredictServer(
        cfg.prediction,
        cache,
        informer,
        wall,
        Checkpointer(Path(cfg.prediction.checkpoint_path)) if cfg.prediction.checkpoint_path else None,
    )
    informer.builder.use_prediction(prediction, informer.node)
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
        agent=dataclasses.replace(
            cfg.qos.agent, feature_gates={name: gates.enabled(name) for name in gates.known()}
        ),
        dry_run=cfg.qos.dry_run,
        degraded=informer.degraded,
        want_fast_samples=fast_sampling.want,
    )
    qos = QOSManager(entries, gates, ext_gates, cfg.options, services, supervisor, agent_metrics)
    hooks = _runtime_hooks(cfg, gates, informer, host, executor, bus, registry)

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

    def start_allocator(s: threading.Event, sup: Supervisor) -> None:
        sup.every("malloc/trim", malloc.TRIM_INTERVAL, malloc.trim, on_error=agent_metrics.tick_error)

    def start_prediction(s: threading.Event, sup: Supervisor) -> None:
        log.info("prediction: %d model(s) restored", prediction.restore())
        hook = agent_metrics.tick_error
        sup.every("prediction/train", cfg.prediction.training_interval, prediction.train, on_error=hook)
        sup.every("prediction/gc", 60.0, prediction.gc, on_error=hook)
        sup.every("prediction/checkpoint", 60.0, prediction.checkpoint, on_error=hook)

    def start_cache(s: threading.Event, sup: Supervisor) -> None:
        loaded = cache.load()
        log.info("metric cache: %d samples restored", loaded)
        sup.go("metriccache/checkpoint", lambda: cache.run_loop(s))

    components = [
        FuncComponent("resourceexecutor", start_executor),
        FuncComponent("metriccache", start_cache),
        FuncComponent("statesinformer", informer.start, informer.has_synced, informer.shutdown),
        FuncComponent("runtimehooks", hooks.start, lambda: True, hooks.shutdown),
        FuncComponent("metricsadvisor", advisor.start, advisor.has_synced, advisor.shutdown),
        FuncComponent("prediction", start_prediction),
        FuncComponent("malloc", start_allocator),
        FuncComponent("qosmanager", lambda s, _sup: qos.run(s), lambda: True, qos.shutdown),
    ]
    http = _http_server(cfg, registry, standalone=informer.standalone)
    if advisor.exposition is not None:  # pre-rendered bytes; the server's default renders per scrape
        http.route("/metrics", advisor.exposition.route)
    http.route("/nodemetric", lambda _q: json_response(informer.nodemetric_status()))
    http.route("/noderesourcetopology", lambda _q: json_response(informer.topology.document()))
    http.route("/events", _events_route(executor))
    http.route("/plugins", lambda _q: json_response(qos.states()))
    sources = StatusSources(
        cfg.node_name, informer, cache, host, executor.events, qos.report, wall, started_at=wall()
    )
    http.route("/status", status_route(sources))
    http.route("/debug/memory", memprofile.route)
    if cfg.pprof_addr:
        components.append(_pprof_component(cfg.pprof_addr))
    return Daemon(components, supervisor, http)


def _pprof_component(addr: str) -> FuncComponent:
    """koordlet's ``--enable-pprof``: profiles on their own listener, so a 30-second profile never holds a
    worker of the endpoint Prometheus and the probes use."""
    host, port = split_address(addr)
    server = ProcessHTTPServer(host, port, None, flag="pprof-addr")
    server.route("/debug/pprof/profile", cpuprofile.profile_route)
    server.route("/debug/pprof/threads", cpuprofile.threads_route)

    def start(_stop: threading.Event, _sup: Supervisor) -> None:
        server.start()
        log.info("serving pprof on port %d (/debug/pprof/profile, /debug/pprof/threads)", server.port)

    return FuncComponent("pprof", start, shutdown_fn=server.shutdown)
