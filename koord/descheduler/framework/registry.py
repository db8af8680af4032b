"""The descheduler's plugin registry: name -> factory(args, handle), the built-ins plus every installed
entry point of the group ``koordlet.descheduler_plugins`` (Koordinator's ``InTreeRegistry`` merged with
an out-of-tree one; the mechanics are :mod:`koord.runtime.pluginregistry`, shared with the scheduler)."""

from __future__ import annotations

from collections.abc import Mapping

from koord.descheduler.framework.interface import PluginFactory
from koord.runtime.pluginregistry import (
    SOURCE_BUILTIN,
    EntryPoints,
    Registry,
    RegistryEntry,
    group_entry_points,
)
from koord.runtime.pluginregistry import discover as _discover

ENTRY_POINT_GROUP = "koordlet.descheduler_plugins"
INSTALLED: EntryPoints = group_entry_points(ENTRY_POINT_GROUP)

__all__ = ["ENTRY_POINT_GROUP", "SOURCE_BUILTIN", "EntryPoints", "Registry", "RegistryEntry", "discover"]


def discover(builtins: Mapping[str, PluginFactory], *, entry_points: EntryPoints = INSTALLED) -> Registry:
    """The built-ins, then every installed ``koordlet.descheduler_plugins`` entry point, by name."""
    return _discover(builtins, entry_points)
