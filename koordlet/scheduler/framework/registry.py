"""The plugin registry: name -> factory(args, handle), from the built-ins and the entry-point group
``koordlet.scheduler_plugins`` (kube-scheduler's ``runtime.Registry`` plus out-of-tree registration).

An entry point's name is the plugin name; its value is the factory (a class taking ``(args, handle)``
is one). A duplicate name or an entry point that fails to load is a startup error naming both sources.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from koordlet.errors import PluginError
from koordlet.scheduler.framework.interface import PluginFactory

ENTRY_POINT_GROUP = "koordlet.scheduler_plugins"
SOURCE_BUILTIN = "builtin"

EntryPoints = Callable[[], Iterable[importlib.metadata.EntryPoint]]


def _entry_points() -> Iterable[importlib.metadata.EntryPoint]:
    return importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)


@dataclass(frozen=True, slots=True)
class RegistryEntry:
    name: str
    factory: PluginFactory
    source: str
    """``builtin`` or ``entrypoint:<distribution>``."""


class Registry:
    """Registered factories by plugin name, in registration order."""

    def __init__(self) -> None:
        self._entries: dict[str, RegistryEntry] = {}

    def register(self, name: str, factory: PluginFactory, source: str = SOURCE_BUILTIN) -> None:
        if not name:
            raise PluginError("", f"from {source}: empty name")
        if not callable(factory):
            raise PluginError(name, f"({source}): factory {factory!r} is not callable")
        old = self._entries.get(name)
        if old is not None:
            raise PluginError(name, f"registered twice ({old.source} and {source})")
        self._entries[name] = RegistryEntry(name, factory, source)

    def get(self, name: str) -> RegistryEntry | None:
        return self._entries.get(name)

    def names(self) -> list[str]:
        return list(self._entries)

    def entries(self) -> list[RegistryEntry]:
        return list(self._entries.values())

    def __contains__(self, name: object) -> bool:
        return name in self._entries


def discover(builtins: Mapping[str, PluginFactory], *, entry_points: EntryPoints = _entry_points) -> Registry:
    """The built-ins, then every installed ``koordlet.scheduler_plugins`` entry point, by name."""
    registry = Registry()
    for name, factory in builtins.items():
        registry.register(name, factory)
    for ep in sorted(entry_points(), key=lambda e: e.name):
        dist = getattr(getattr(ep, "dist", None), "name", None) or ep.value
        try:
            factory = ep.load()
        except Exception as err:
            raise PluginError(ep.name, f"entry point {ep.value!r} ({dist}) failed to load: {err!r}") from err
        registry.register(ep.name, factory, f"entrypoint:{dist}")
    return registry
