"""Name -> factory registries for the cluster side's plugin frameworks (kube-scheduler's and
koord-descheduler's ``runtime.Registry`` plus out-of-tree registration through an entry-point group).

The scheduler extender and the descheduler each keep one :class:`Registry`: their built-ins first, then
every entry point of their group (``koordlet.scheduler_plugins``, ``koordlet.descheduler_plugins``). An
entry point's name is the plugin name and its value the factory (a class taking ``(args, handle)`` is
one). A duplicate name, or an entry point that fails to load, is a startup error naming both sources.
:func:`plugin_config` reads the ``pluginConfig[{name, args}]`` list both configurations share.
Pure: the standard library and :mod:`koord.runtime.errors` only.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from koord.runtime.errors import ConfigError, PluginError

SOURCE_BUILTIN = "builtin"

EntryPoints = Callable[[], Iterable[importlib.metadata.EntryPoint]]


@dataclass(frozen=True, slots=True)
class RegistryEntry:
    name: str
    factory: Callable[..., Any]
    source: str
    """``builtin`` or ``entrypoint:<distribution>``."""


class Registry:
    """Registered factories by plugin name, in registration order."""

    def __init__(self) -> None:
        self._entries: dict[str, RegistryEntry] = {}

    def register(self, name: str, factory: Callable[..., Any], source: str = SOURCE_BUILTIN) -> None:
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


def group_entry_points(group: str) -> EntryPoints:
    """The installed entry points of ``group``, looked up when called."""
    return lambda: importlib.metadata.entry_points(group=group)


def discover(builtins: Mapping[str, Callable[..., Any]], entry_points: EntryPoints) -> Registry:
    """The built-ins, then every entry point ``entry_points()`` yields, by name."""
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


def plugin_config(raw: Any, where: str) -> dict[str, Mapping[str, Any]]:
    """``pluginConfig``: plugin name -> its ``args`` (``apiVersion``/``kind`` removed); a malformed entry,
    an unknown field or a second entry for one plugin is a :class:`ConfigError` naming it."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: want a list of {{name, args}}")
    out: dict[str, Mapping[str, Any]] = {}
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item["name"]:
            raise ConfigError(f"{at}: want {{name: <plugin>, args: {{...}}}}, got {item!r}")
        extra = sorted(set(item) - {"name", "args"})
        if extra:
            raise ConfigError(f"{at}: unknown field(s) {', '.join(extra)}")
        name = str(item["name"])
        if name in out:
            raise ConfigError(f"{at}: duplicate pluginConfig for {name}")
        args = item.get("args") or {}
        if not isinstance(args, Mapping):
            raise ConfigError(f"{at}.args: want an object, got {args!r}")
        out[name] = {k: v for k, v in args.items() if k not in ("apiVersion", "kind")}
    return out
