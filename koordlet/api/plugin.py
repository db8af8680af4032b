"""The plugin contract itself: the QOSPlugin Protocol, its context, flags, feature specs, registration.

A QoS plugin is the Python form of Koordinator's ``ExtensionPlugin`` (``InitFlags``/``Setup``/``Run``) plus
a ``shutdown`` hook. :func:`register_qos_ext_plugin` is Koordinator's ``RegisterQOSExtPlugin`` for
in-process registration; installed plugins are found through the ``koordlet.qos_plugins`` entry points.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from koordlet.api.services import Evictor, HostReader, MetricReader, ResourceWriter, StatesReader
from koordlet.errors import PluginError

API_VERSION = 1
"""Bumped on any incompatible change of this package; a plugin may declare ``api_version`` to match."""


class Stage(enum.StrEnum):
    """Kubernetes feature maturity; ``AllAlpha``/``AllBeta`` switch every gate of that stage."""

    ALPHA = "Alpha"
    BETA = "Beta"
    GA = "GA"
    DEPRECATED = "Deprecated"


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    """A gate's default state and stage, as Kubernetes' ``featuregate.FeatureSpec``."""

    default: bool
    stage: Stage = Stage.ALPHA
    lock_to_default: bool = False
    """A locked gate (GA) cannot be changed from its default."""


FlagType = type[int] | type[float] | type[str] | type[bool]


@dataclass(frozen=True, slots=True)
class Flag:
    """One command-line option a plugin declares; it becomes ``--<name>`` of ``koordlet run``.

    The parsed value is found in ``ctx.options[name]`` (key without dashes). Environment variable
    ``KOORDLET_<NAME_WITH_UNDERSCORES>`` and the ``--config`` file key ``<name>`` set it too.
    """

    name: str
    type: FlagType
    default: object
    help: str = ""


class FlagSet:
    """The flags a plugin adds in :meth:`QOSPlugin.init_flags` (Go's ``*flag.FlagSet``)."""

    def __init__(self, owner: str = "") -> None:
        self.owner = owner
        self._flags: dict[str, Flag] = {}

    def add(self, flag: Flag) -> None:
        """Declare a flag; a name declared twice is a :class:`PluginError`."""
        if not flag.name or flag.name.startswith("-") or " " in flag.name:
            raise PluginError(self.owner, f"bad flag name {flag.name!r}: use kebab-case without dashes")
        if flag.name in self._flags:
            raise PluginError(self.owner, f"flag --{flag.name} declared twice")
        self._flags[flag.name] = flag

    def __iter__(self) -> Any:
        return iter(self._flags.values())

    def __len__(self) -> int:
        return len(self._flags)

    def __contains__(self, name: object) -> bool:
        return name in self._flags


Scheduler = Callable[[float, Callable[[], None]], None]
"""``every(interval_seconds, fn)``: call ``fn`` now and then every interval until stop; a raising tick is
logged and counted (``koordlet_plugin_tick_errors_total``) and the loop goes on."""


@dataclass(frozen=True)
class PluginContext:
    """Everything a plugin gets in :meth:`QOSPlugin.setup`. Keep it; do no failing I/O in ``setup``."""

    node_name: str
    options: Mapping[str, object]
    """Parsed values of every flag (plugin flags and agent flags), keyed by flag name."""
    states: StatesReader
    metrics: MetricReader
    host: HostReader
    executor: ResourceWriter
    evictor: Evictor
    clock: Callable[[], float]
    """Monotonic seconds; tests pass a fake clock."""
    logger: logging.Logger
    every: Scheduler
    subscribe: Callable[[str, Callable[[], None]], None]
    """``subscribe(EVENT_*, fn)``: ``fn`` runs on the publisher's thread; keep it short."""
    registry: object = None
    """The agent's ``prometheus_client.CollectorRegistry`` for the plugin's own metrics."""
    dry_run: bool = False
    """When true, plugins compute and log decisions; the executor and evictor do not act."""
    wall_clock: Callable[[], float] = field(default=lambda: 0.0)
    """Seconds since the epoch, for timestamps only (never for rates)."""


@runtime_checkable
class QOSPlugin(Protocol):
    """A QoS plugin (Koordinator's ``ExtensionPlugin`` plus ``shutdown``)."""

    name: ClassVar[str]
    """Registry key and feature-gate key, Koordinator's spelling (``CPUBurst``)."""
    feature: ClassVar[FeatureSpec]

    def init_flags(self, flags: FlagSet) -> None:
        """Declare the plugin's options; called for every plugin, enabled or not."""
        ...

    def setup(self, ctx: PluginContext) -> None:
        """Keep the context. Called only when the plugin's gate is enabled."""
        ...

    def run(self, stop: threading.Event) -> None:
        """Start work and return at once (schedule it with ``ctx.every``)."""
        ...

    def shutdown(self) -> None:
        """Restore what the plugin changed; called in reverse start order when the agent stops."""
        ...


class QOSPluginBase:
    """Convenience base: stores the context, no flags, nothing to restore. Override what you need."""

    name: ClassVar[str] = ""
    feature: ClassVar[FeatureSpec] = FeatureSpec(default=False, stage=Stage.ALPHA)
    api_version: ClassVar[int] = API_VERSION
    ctx: PluginContext

    def init_flags(self, flags: FlagSet) -> None:
        return None

    def setup(self, ctx: PluginContext) -> None:
        self.ctx = ctx

    def run(self, stop: threading.Event) -> None:
        return None

    def shutdown(self) -> None:
        return None


REQUIRED_METHODS = ("init_flags", "setup", "run", "shutdown")

_ext_lock = threading.Lock()
_ext_plugins: dict[str, tuple[FeatureSpec, QOSPlugin]] = {}


def register_qos_ext_plugin(name: str, spec: FeatureSpec, plugin: QOSPlugin) -> None:
    """Register an extension plugin in-process (Koordinator's ``RegisterQOSExtPlugin``).

    Must be called before ``koordlet run`` parses its flags. A name registered twice raises
    :class:`PluginError` ("already registered"), as in Koordinator.
    """
    with _ext_lock:
        if name in _ext_plugins:
            raise PluginError(name, "extension plugin already registered")
        _ext_plugins[name] = (spec, plugin)


def registered_ext_plugins() -> dict[str, tuple[FeatureSpec, QOSPlugin]]:
    """A copy of the in-process extension registry."""
    with _ext_lock:
        return dict(_ext_plugins)


def unregister_qos_ext_plugin(name: str) -> None:
    """Remove an in-process registration (for tests and embedding)."""
    with _ext_lock:
        _ext_plugins.pop(name, None)
