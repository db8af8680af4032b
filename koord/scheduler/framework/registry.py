"""The scheduler's plugin registry: name -> factory(args, handle), from the built-ins and the entry-point
group ``koordlet.scheduler_plugins`` (kube-scheduler's ``runtime.Registry`` plus out-of-tree
registration; the mechanics are :mod:`koord.runtime.pluginregistry`, shared with every plugin kind).
"""

from __future__ import annotations

from collections.abc import Mapping

from koord.runtime import pluginregistry
from koord.runtime.pluginregistry import SOURCE_BUILTIN, EntryPoints, Registry, RegistryEntry
from koord.scheduler.framework.interface import PluginFactory

ENTRY_POINT_GROUP = "koordlet.scheduler_plugins"

__all__ = ["ENTRY_POINT_GROUP", "SOURCE_BUILTIN", "EntryPoints", "Registry", "RegistryEntry", "discover"]


def discover(builtins: Mapping[str, PluginFactory], *, entry_points: EntryPoints | None = None) -> Registry:
    """The built-ins, then every installed entry point of :data:`ENTRY_POINT_GROUP`, by name."""
    return pluginregistry.discover(
        builtins, entry_points or pluginregistry.group_entry_points(ENTRY_POINT_GROUP)
    )
