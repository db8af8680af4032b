"""The descheduler framework (Koordinator's, after the seed on writing descheduler plugins): the plugin
contract (:mod:`.interface`), profiles from a DeschedulerConfiguration (:mod:`.profile`), the built-ins plus
the entry points of :data:`ENTRY_POINT_GROUP`, the runner and the profile's evictor (:mod:`.runtime`), and
``NodeFit`` (:mod:`.nodefit`). Plugins decide with the pod and node vocabulary every process shares:
:mod:`koordshared.apis.core.pod` (identity, owners, priority, costs) and :mod:`koordshared.apis.core.node`
(readiness, selection, node affinity, taints). Nothing here talks to the API server.
"""

from koord.descheduler.framework.interface import (
    BackgroundPlugin,
    BalancePlugin,
    DeschedulePlugin,
    EventRecorder,
    EvictionRefused,
    EvictOptions,
    Evictor,
    EvictPlugin,
    FilterPlugin,
    Handle,
    Informers,
    Obj,
    Plugin,
    PluginFactory,
    PreEvictionFilterPlugin,
    RoundPlugin,
    Status,
    Store,
)
from koordshared.runtime.errors import InvalidArgs

ENTRY_POINT_GROUP = "koord.descheduler_plugins"
"""Where a distribution declares its descheduler plugins: name = factory ``(args, handle)``."""
DEPRECATED_ENTRY_POINT_GROUPS = ("koordlet.descheduler_plugins",)
"""The group's old names, still read (with a deprecation line)."""

__all__ = [
    "DEPRECATED_ENTRY_POINT_GROUPS",
    "ENTRY_POINT_GROUP",
    "BackgroundPlugin",
    "BalancePlugin",
    "DeschedulePlugin",
    "EventRecorder",
    "EvictOptions",
    "EvictPlugin",
    "EvictionRefused",
    "Evictor",
    "FilterPlugin",
    "Handle",
    "Informers",
    "InvalidArgs",
    "Obj",
    "Plugin",
    "PluginFactory",
    "PreEvictionFilterPlugin",
    "RoundPlugin",
    "Status",
    "Store",
]
