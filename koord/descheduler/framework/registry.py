"""The descheduler's plugin registry: name -> factory(args, handle), the built-ins plus every installed
entry point of the group ``koordlet.descheduler_plugins`` (Koordinator's ``InTreeRegistry`` merged with
an out-of-tree one; the mechanics are :mod:`koord.runtime.pluginregistry`, shared with every plugin kind).
"""

from __future__ import annotations

from collections.abc import Mapping

from koord.descheduler.framework.interface import PluginFactory
from koord.runtime import pluginregistry
from koord.runtime.pluginregistry import SOURCE_BUILTIN, EntryPoints, Registry, RegistryEntry

ENTRY_POINT_GROUP = "koordlet.descheduler_plugins"

__all__ = ["ENTRY_POINT_GROUP", "SOURCE_BUILTIN", "EntryPoints", "Registry", "RegistryEntry", "discover"]


def discover(builtins: Mapping[str, PluginFactory], *, entry_points: EntryPoints | None = None) -> Registry:
    """The built-ins, then every installed entry point of :data:`ENTRY_POINT_GROUP`, by name."""
    return pluginregistry.discover(
        builtins, entry_points or pluginregistry.group_entry_points(ENTRY_POINT_GROUP)
    )
