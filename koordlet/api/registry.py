"""In-process registration of extension plugins (Koordinator's ``RegisterQOSExtPlugin``).

Installed plugins are found through the ``koordlet.qos_plugins`` entry points instead; this registry is for
code that embeds the agent. The loader reads it once, before flags are parsed.
"""

from __future__ import annotations

import threading

from koordlet.api.flags import FeatureSpec
from koordlet.api.plugin import QOSPlugin
from koordshared.runtime.errors import PluginError

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
