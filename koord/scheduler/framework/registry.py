"""The scheduler's plugin registry: name -> factory(args, handle), from the built-ins and the entry-point
group ``koordlet.scheduler_plugins`` (kube-scheduler's ``runtime.Registry`` plus out-of-tree
registration; the mechanics are :mod:`koord.runtime.pluginregistry`, shared with the descheduler).
"""

from __future__ import annotations

from collections.abc import Mapping

from koord.runtime.pluginregistry import (
    SOURCE_BUILTIN,
    EntryPoints,
    Registry,
    RegistryEntry,
    group_entry_points,
)
from koord.runtime.pluginregistry import discover as _discover
from koord.scheduler.framework.interface import PluginFactory

ENTRY_POINT_GROUP = "koordlet.scheduler_plugins"
INSTALLED: EntryPoints = group_entry_points(ENTRY_POINT_GROUP)

__all__ = ["ENTRY_POINT_GROUP", "SOURCE_BUILTIN", "EntryPoints", "Registry", "RegistryEntry", "discover"]


def discover(builtins: Mapping[str, PluginFactory], *, entry_points: EntryPoints = INSTALLED) -> Registry:
    """The built-ins, then every installed ``koordlet.scheduler_plugins`` entry point, by name."""
    return _discover(builtins, entry_points)
