"""The built-in Deschedule and Balance plugins, written out (no registration as an import side effect):
LowNodeLoad (Balance) and RemovePodsViolatingNodeAffinity (Deschedule). The default Evict and Filter
plugin lives in :mod:`koord.descheduler.evictor` (it talks to the API server, these do not).

Third-party plugins register through the ``koord.descheduler_plugins`` entry-point group instead.
"""

from collections.abc import Mapping

from koord.descheduler.framework import PluginFactory
from koord.descheduler.plugins.lownodeload import NAME as LOW_NODE_LOAD
from koord.descheduler.plugins.lownodeload import LowNodeLoad
from koord.descheduler.plugins.nodeaffinity import NAME as NODE_AFFINITY
from koord.descheduler.plugins.nodeaffinity import RemovePodsViolatingNodeAffinity

BUILTIN: Mapping[str, PluginFactory] = {
    LOW_NODE_LOAD: LowNodeLoad,
    NODE_AFFINITY: RemovePodsViolatingNodeAffinity,
}
