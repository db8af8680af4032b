"""The descheduler-plugin contract (Koordinator's ``pkg/descheduler/framework/types.go``, in Python).

A plugin is any object with a ``name`` and one or more of: ``deschedule(nodes)`` (a Deschedule plugin:
checks pods one by one against a rule and evicts violators), ``balance(nodes)`` (a Balance plugin: looks
at the spread over many nodes and decides what to move), ``filter(pod)``/``pre_eviction_filter(pod)``
(a Filter plugin: may this pod be evicted?) and ``evict(pod, options)`` (an Evict plugin: carry the
eviction out). In each round every enabled Deschedule plugin of every profile runs before any Balance
plugin, so a balance is not undone by a later deschedule. A factory ``(args, handle)`` builds a plugin;
the handle gives the cluster caches, the API client and the profile's :class:`Evictor`.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Status:
    """What ``deschedule``/``balance`` return when they failed (Go's ``*Status{Err}``); ``None`` is
    success. The round goes on with the next plugin; the error is logged and counted."""

    error: str


@dataclass(frozen=True, slots=True)
class EvictOptions:
    """Koordinator's ``EvictOptions``: who asks (the plugin), why (the text of the Event and the log
    line), the deletion's grace period, and ``dry_run``: decide and log exactly as for a real eviction
    (limits included), but call nothing and record no Event."""

    plugin: str = ""
    reason: str = ""
    grace_period_seconds: int | None = None
    dry_run: bool = False


class EvictionRefused(Exception):
    """An Evict plugin may raise this instead of returning ``False`` to say why it did not evict;
    ``result`` becomes the ``result`` label of ``descheduler_pods_evicted`` (e.g. ``pdb``,
    ``max-per-node``)."""

    def __init__(self, result: str, message: str) -> None:
        super().__init__(message)
        self.result = result


@runtime_checkable
class Plugin(Protocol):
    name: str


class DeschedulePlugin(Plugin, Protocol):
    def deschedule(self, nodes: Sequence[Obj]) -> Status | None: ...


class BalancePlugin(Plugin, Protocol):
    def balance(self, nodes: Sequence[Obj]) -> Status | None: ...


class FilterPlugin(Plugin, Protocol):
    def filter(self, pod: Obj) -> bool:
        """May ``pod`` be evicted at all (static checks: owners, priority, storage, namespaces...)?"""


class PreEvictionFilterPlugin(Plugin, Protocol):
    def pre_eviction_filter(self, pod: Obj) -> bool:
        """Checked right before an eviction (limits that change as pods are evicted)."""


class EvictPlugin(Plugin, Protocol):
    def evict(self, pod: Obj, options: EvictOptions) -> bool:
        """Evict ``pod`` (no pre-check is done for you); ``True`` when it was evicted (or would have been,
        in a dry run). Honour ``options.dry_run``."""


@runtime_checkable
class RoundPlugin(Plugin, Protocol):
    """Optional, at any point: told when a round starts, for plugins that keep per-round state (the
    framework calls it on every plugin of the profile that has it, before the round's first plugin)."""

    def begin_round(self) -> None: ...


@runtime_checkable
class BackgroundPlugin(Plugin, Protocol):
    """Optional: work between rounds (a controller). ``background()`` gives ``(interval, tick)``, or
    ``None`` when there is none; the process calls ``tick`` every ``interval`` seconds while it leads."""

    def background(self) -> tuple[float, Callable[[], None]] | None: ...


class Evictor(Protocol):
    """The profile's evictor as plugins see it: its Filter plugins and its one Evict plugin."""

    def filter(self, pod: Obj) -> bool: ...

    def pre_eviction_filter(self, pod: Obj) -> bool: ...

    def evict(self, pod: Obj, options: EvictOptions) -> bool: ...


class Store(Protocol):
    """A read-only cache of one resource (an informer, or a ``MemoryStore`` in tests)."""

    def get(self, key: str) -> Obj | None: ...

    def objects(self) -> list[Obj]: ...

    def by_index(self, index: str, value: str) -> list[Obj]: ...

    def has_synced(self) -> bool: ...

    def __len__(self) -> int: ...


class Informers(Protocol):
    """The process's shared caches. ``pods`` carries the indexes ``node`` (``spec.nodeName``) and
    ``owner`` (controller UID); terminated pods are not in it. ``shared`` returns one cache per name,
    created (and started with the others) on first use, for plugins that need another resource."""

    @property
    def nodes(self) -> Store: ...

    @property
    def pods(self) -> Store: ...

    @property
    def node_metrics(self) -> Store: ...

    def shared(
        self, name: str, list_fn: Callable[..., Any], kwargs: Mapping[str, Any] | None = None
    ) -> Store: ...


class EventRecorder(Protocol):
    def event(self, obj: Obj, type_: str, reason: str, message: str, *, action: str = "Descheduling") -> None:
        """Record an Event (``Normal``/``Warning``) regarding ``obj``; never blocks. ``action`` is what
        the descheduler was doing (``Evicting`` for an eviction, as Koordinator's evictor says)."""


class Handle(Protocol):
    """What a plugin gets at construction."""

    @property
    def client(self) -> Any:
        """The API client (``kubernetes.client.ApiClient``); ``None`` when built offline to check args."""

    @property
    def informers(self) -> Informers: ...

    @property
    def evictor(self) -> Evictor: ...

    @property
    def recorder(self) -> EventRecorder: ...

    @property
    def dry_run(self) -> bool:
        """The configuration's ``dryRun``: evictions are decided and logged, never carried out."""

    @property
    def interval(self) -> float:
        """The configuration's ``deschedulingInterval`` in seconds (0: one round only)."""

    def get_node(self, name: str) -> Obj | None: ...

    def pods_on_node(self, node_name: str) -> list[Obj]:
        """Every non-terminated pod bound to ``node_name``."""

    def get_pod(self, namespace: str, name: str) -> Obj | None: ...

    def node_metric(self, node_name: str) -> Obj | None: ...

    def now(self) -> float:
        """Wall-clock seconds (injected, so tests control NodeMetric expiry)."""

    def monotonic(self) -> float:
        """Monotonic seconds (injected, so tests control time windows)."""

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; ``True`` (at once) when the descheduler is stopping."""

    @property
    def shared(self) -> dict[str, Any]:
        """Process-wide state plugins share across profiles, by a name of the plugin's choosing."""


PluginFactory = Callable[[Mapping[str, Any] | None, Handle], Any]
"""``factory(args, handle)``: ``args`` is the profile's ``pluginConfig[].args`` for this plugin (``None``
when absent, ``apiVersion``/``kind`` removed). Raise :class:`InvalidArgs` naming the field."""

EXTENSION_POINTS: Mapping[str, str] = {
    "deschedule": "deschedule",
    "balance": "balance",
    "filter": "filter",
    "evict": "evict",
}
"""Profile extension point -> the method a plugin needs to be enabled there."""
