"""The built-in scheduler plugins, written out (no registration on import side effects).

Third-party plugins register through the ``koordlet.scheduler_plugins`` entry-point group instead.
"""

from collections.abc import Mapping

from koord.scheduler.framework import PluginFactory
from koord.scheduler.plugins.loadaware import NAME as LOAD_AWARE
from koord.scheduler.plugins.loadaware import LoadAwareScheduling

BUILTIN: Mapping[str, PluginFactory] = {
    LOAD_AWARE: LoadAwareScheduling,
}
