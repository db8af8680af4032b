"""Name -> factory registries for the cluster side's plugin frameworks (kube-scheduler's and
koord-descheduler's ``runtime.Registry`` plus out-of-tree registration through an entry-point group).

The scheduler and the descheduler each keep one :class:`Registry`: their built-ins first, then every
entry point of their group (``koord.scheduler_plugins``, ``koord.descheduler_plugins``; the groups' old
names are still read, with a deprecation line). An entry point's name is the plugin name and its value
the factory (a class taking ``(args, handle)`` is one). A duplicate name, or an entry point that fails to
load, is a startup error naming both sources.
The QoS plugin loader reads its entry points through :func:`load_entry_points` too, so every plugin kind
is found, loaded and named the same way.
Pure: the standard library and :mod:`koordshared.runtime.errors` only.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordshared.runtime.errors import PluginError

log = logging.getLogger(__name__)

SOURCE_BUILTIN = "builtin"

EntryPoints = Callable[[], Iterable[importlib.metadata.EntryPoint]]
Select = Callable[..., Iterable[importlib.metadata.EntryPoint]]


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


def group_entry_points(
    group: str, deprecated: Sequence[str] = (), *, select: Select = importlib.metadata.entry_points
) -> EntryPoints:
    """The installed entry points of ``group``, then those of each ``deprecated`` group (a group's old
    name), looked up when called. Each old-group entry point is logged; one whose name the new group
    already declares is skipped."""

    def read() -> list[importlib.metadata.EntryPoint]:
        out = list(select(group=group))
        names = {ep.name for ep in out}
        for old in deprecated:
            for ep in select(group=old):
                log.warning(
                    "entry point %s (%s) is declared in the deprecated group %s; declare it in %s",
                    ep.name, ep.value, old, group,
                )  # fmt: skip
                if ep.name not in names:
                    names.add(ep.name)
                    out.append(ep)
        return out

    return read


def discover(
    builtins: Mapping[str, Callable[..., Any]],
    group: str,
    *,
    deprecated: Sequence[str] = (),
    entry_points: EntryPoints | None = None,
) -> Registry:
    """The built-ins, then every entry point of ``group`` (and its ``deprecated`` names), by name;
    ``entry_points`` replaces the installed ones (tests)."""
    registry = Registry()
    for name, factory in builtins.items():
        registry.register(name, factory)
    for name, factory, source in load_entry_points(entry_points or group_entry_points(group, deprecated)):
        registry.register(name, factory, source)
    return registry


def load_entry_points(entry_points: EntryPoints) -> list[tuple[str, Any, str]]:
    """``(name, loaded object, source)`` of every entry point, by name; the source is
    ``entrypoint:<distribution>``. One that fails to load is a :class:`PluginError` naming it."""
    out = []
    for ep in sorted(entry_points(), key=lambda e: e.name):
        dist = getattr(getattr(ep, "dist", None), "name", None) or ep.value
        try:
            obj = ep.load()
        except Exception as err:
            raise PluginError(ep.name, f"entry point {ep.value!r} ({dist}) failed to load: {err!r}") from err
        out.append((ep.name, obj, f"entrypoint:{dist}"))
    return out
