"""Runs one profile's plugins (Koordinator's ``frameworkImpl`` and ``evictorProxy``).

:class:`Framework` builds every plugin the profile enables, once, with its ``pluginConfig`` args and a
:class:`ProfileHandle`; a name the registry does not know, args the factory refuses or a plugin lacking the
method of the point it is enabled at is a :class:`~koordshared.runtime.errors.PluginError` naming the plugin
and the profile (the scheduler's framework raises the same, :mod:`koordshared.runtime.pluginset`); a plugin
enabled twice at a point, or a profile without exactly one Evict plugin, a ``ConfigError``.
:class:`ProfileEvictor` is what plugins call: ``filter`` ANDs the Filter plugins; ``evict`` applies the
round's limits (the configuration's ``maxNoOfPodsToEvict*``), turns the configuration's ``dryRun`` into
``EvictOptions.dry_run``, calls the Evict plugin and counts the outcome. A plugin that raises fails its own
call only; the round goes on."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from koord.descheduler.framework.interface import (
    EXTENSION_POINTS,
    EventRecorder,
    EvictionRefused,
    EvictOptions,
    Informers,
    Obj,
    RoundPlugin,
    Status,
)
from koord.descheduler.framework.profile import POINTS, Profile
from koordshared.apis.core import pod as podutil
from koordshared.apis.core.pod import as_map
from koordshared.runtime.errors import ConfigError, PluginError
from koordshared.runtime.pluginregistry import Registry
from koordshared.runtime.pluginset import build_plugin, check_plugin_config, refuse_duplicates

log = logging.getLogger(__name__)


class EvictionCounter(Protocol):
    def evicted(self, result: str, plugin: str, namespace: str, node: str) -> None: ...

    def plugin_call(self, profile: str, plugin: str, point: str, seconds: float, failed: bool) -> None: ...


class NoCounter:
    def evicted(self, result: str, plugin: str, namespace: str, node: str) -> None:
        pass

    def plugin_call(self, profile: str, plugin: str, point: str, seconds: float, failed: bool) -> None:
        pass


@dataclass(frozen=True, slots=True)
class RoundLimits:
    """The configuration's ``maxNoOfPodsToEvictPerNode``/``PerNamespace``/``Total`` (``None``: no limit)."""

    per_node: int | None = None
    per_namespace: int | None = None
    total: int | None = None


class RoundLimiter:
    """Koordinator's ``EvictionLimiter``: evictions counted per round (reset when a round starts), shared
    by every profile."""

    def __init__(self, limits: RoundLimits) -> None:
        self.limits = limits
        self.reset()

    def reset(self) -> None:
        self.total = 0
        self.by_node: dict[str, int] = {}
        self.by_namespace: dict[str, int] = {}

    def refusal(self, pod: Obj) -> str:
        """Why the next eviction of ``pod`` would break a limit (empty: it would not)."""
        node = str(as_map(pod, "spec").get("nodeName") or "")
        ns = str(podutil.meta(pod).get("namespace") or "")
        lim = self.limits
        if node and lim.per_node is not None and self.by_node.get(node, 0) + 1 > lim.per_node:
            return f"maximum number of pods per node reached ({lim.per_node})"
        if lim.per_namespace is not None and self.by_namespace.get(ns, 0) + 1 > lim.per_namespace:
            return f"maximum number of pods per namespace reached ({lim.per_namespace})"
        if lim.total is not None and self.total + 1 > lim.total:
            return f"maximum number of pods total reached ({lim.total})"
        return ""

    def done(self, pod: Obj) -> None:
        node = str(as_map(pod, "spec").get("nodeName") or "")
        ns = str(podutil.meta(pod).get("namespace") or "")
        if node:
            self.by_node[node] = self.by_node.get(node, 0) + 1
        self.by_namespace[ns] = self.by_namespace.get(ns, 0) + 1
        self.total += 1


@dataclass
class Environment:
    """What every profile shares: the client, caches, Event recorder, clocks, the round's limiter."""

    client: Any
    informers: Informers
    recorder: EventRecorder
    dry_run: bool = False
    interval: float = 0.0
    limiter: RoundLimiter = dataclasses.field(default_factory=lambda: RoundLimiter(RoundLimits()))
    counter: EvictionCounter = dataclasses.field(default_factory=NoCounter)
    now: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    stop: threading.Event = dataclasses.field(default_factory=threading.Event)
    may_act: Callable[[], bool] = lambda: True
    """False while this replica does not lead: evictions are refused (``not-leader``)."""
    shared: dict[str, Any] = dataclasses.field(default_factory=dict)
    """State plugins share across profiles (one per process), by a name of the plugin's choosing."""


class ProfileEvictor:
    """The profile's :class:`~koord.descheduler.framework.interface.Evictor` (see the module docstring)."""

    def __init__(self, env: Environment, profile: str) -> None:
        self.env = env
        self.profile = profile
        self.filters: list[Any] = []
        self.evictors: list[Any] = []

    def filter(self, pod: Obj) -> bool:
        return all(f.filter(pod) for f in self.filters)

    def pre_eviction_filter(self, pod: Obj) -> bool:
        return all(f.pre_eviction_filter(pod) for f in self.filters if hasattr(f, "pre_eviction_filter"))

    def evict(self, pod: Obj, options: EvictOptions) -> bool:
        if not self.evictors:
            raise RuntimeError(f"profile {self.profile}: no Evict plugin")
        if self.env.dry_run and not options.dry_run:
            options = dataclasses.replace(options, dry_run=True)
        node = str(as_map(pod, "spec").get("nodeName") or "")
        ns = str(podutil.meta(pod).get("namespace") or "")
        refusal = self.env.limiter.refusal(pod) or ("" if self.env.may_act() else "not-leader")
        if refusal:
            log.info("not evicting %s from %s: %s", podutil.pod_key(pod), node or "-", refusal)
            self.env.counter.evicted(refusal, options.plugin, ns, node)
            return False
        result = "failed"
        try:
            ok = bool(self.evictors[0].evict(pod, options))
        except EvictionRefused as refused:
            ok, result = False, refused.result
        except Exception:
            log.exception("evict plugin %s failed on %s", self.evictors[0].name, podutil.pod_key(pod))
            ok, result = False, "error"
        if ok:
            self.env.limiter.done(pod)
            result = "dry-run" if options.dry_run else "success"
        self.env.counter.evicted(result, options.plugin, ns, node)
        return ok


class ProfileHandle:
    """The :class:`~koord.descheduler.framework.interface.Handle` of one profile."""

    def __init__(self, env: Environment, evictor: ProfileEvictor) -> None:
        self._env = env
        self._evictor = evictor

    @property
    def client(self) -> Any:
        return self._env.client

    @property
    def informers(self) -> Informers:
        return self._env.informers

    @property
    def evictor(self) -> ProfileEvictor:
        return self._evictor

    @property
    def recorder(self) -> EventRecorder:
        return self._env.recorder

    @property
    def dry_run(self) -> bool:
        return self._env.dry_run

    @property
    def interval(self) -> float:
        return self._env.interval

    def get_node(self, name: str) -> Obj | None:
        return self._env.informers.nodes.get(name)

    def pods_on_node(self, node_name: str) -> list[Obj]:
        return self._env.informers.pods.by_index("node", node_name)

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        return self._env.informers.pods.get(f"{namespace}/{name}")

    def node_metric(self, node_name: str) -> Obj | None:
        return self._env.informers.node_metrics.get(node_name)

    def now(self) -> float:
        return self._env.now()

    def monotonic(self) -> float:
        return self._env.monotonic()

    def wait(self, seconds: float) -> bool:
        return self._env.stop.wait(seconds)

    @property
    def shared(self) -> dict[str, Any]:
        return self._env.shared


class Framework:
    """One profile's plugins, built once (see the module docstring)."""

    def __init__(self, profile: Profile, registry: Registry, env: Environment) -> None:
        self.profile = profile
        self.env = env
        self.evictor = ProfileEvictor(env, profile.name)
        self.handle = ProfileHandle(env, self.evictor)
        self.plugins: dict[str, Any] = {}
        where = f"profile {profile.name!r}"
        check_plugin_config(profile.plugin_config, registry, where)
        self.points: dict[str, list[Any]] = {p: [] for p in POINTS}
        for point in POINTS:
            refuse_duplicates(profile.enabled(point), point, where)
            for name in profile.enabled(point):
                plugin = self.plugins.get(name)
                if plugin is None:
                    args = profile.plugin_config.get(name)
                    plugin = self.plugins[name] = build_plugin(registry, name, args, self.handle, where)
                method = EXTENSION_POINTS[point]
                if not callable(getattr(plugin, method, None)):
                    raise PluginError(name, f"{where}: enabled at {point} but has no {method}()")
                self.points[point].append(plugin)
        for name in profile.plugin_config:
            if name not in self.plugins:
                log.info("%s: pluginConfig for %s, which no extension point enables (ignored)", where, name)
        if len(self.points["evict"]) != 1:
            found = ", ".join(p.name for p in self.points["evict"]) or "none"
            raise ConfigError(f"{where}: exactly one evict plugin must be enabled, found {found}")
        self.evictor.filters = self.points["filter"]
        self.evictor.evictors = self.points["evict"]

    def begin_round(self) -> None:
        """Tell plugins that keep per-round state (:class:`RoundPlugin`) that a round starts."""
        for plugin in self.plugins.values():
            if isinstance(plugin, RoundPlugin):
                plugin.begin_round()

    def _run(self, point: str, nodes: Sequence[Obj]) -> list[str]:
        errors = []
        method = EXTENSION_POINTS[point]
        for plugin in self.points[point]:
            started = self.env.monotonic()
            failed = False
            try:
                status = getattr(plugin, method)(nodes)
            except Exception as err:
                log.exception("profile %s: %s.%s failed", self.profile.name, plugin.name, method)
                status = Status(f"{type(err).__name__}: {err}")
            if isinstance(status, Status):
                failed = True
                errors.append(f"{plugin.name}: {status.error}")
            self.env.counter.plugin_call(
                self.profile.name, plugin.name, point, self.env.monotonic() - started, failed
            )
        return errors

    def run_deschedule(self, nodes: Sequence[Obj]) -> list[str]:
        """Every Deschedule plugin in order; the errors, one line per failed plugin."""
        return self._run("deschedule", nodes)

    def run_balance(self, nodes: Sequence[Obj]) -> list[str]:
        return self._run("balance", nodes)
