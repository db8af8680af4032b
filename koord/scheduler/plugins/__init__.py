"""The built-in scheduler plugins, written out (no registration on import side effects).

Third-party plugins register through the ``koord.scheduler_plugins`` entry-point group instead.
"""

from collections.abc import Mapping

from koord.scheduler.framework import DEPRECATED_ENTRY_POINT_GROUPS, ENTRY_POINT_GROUP, PluginFactory
from koord.scheduler.plugins import (
    defaultbinder,
    defaultprebind,
    elasticquota,
    nodeaffinity,
    nodename,
    nodeports,
    nodeunschedulable,
    queuesort,
    schedulinggates,
    tainttoleration,
    volumebinding,
)
from koord.scheduler.plugins.coscheduling import NAME as COSCHEDULING
from koord.scheduler.plugins.coscheduling import Coscheduling
from koord.scheduler.plugins.defaultpreemption import NAME as DEFAULT_PREEMPTION
from koord.scheduler.plugins.defaultpreemption import DefaultPreemption
from koord.scheduler.plugins.deviceshare import NAME as DEVICE_SHARE
from koord.scheduler.plugins.deviceshare import DeviceShare
from koord.scheduler.plugins.interpodaffinity import NAME as INTER_POD_AFFINITY
from koord.scheduler.plugins.interpodaffinity import InterPodAffinity
from koord.scheduler.plugins.loadaware import NAME as LOAD_AWARE
from koord.scheduler.plugins.loadaware import LoadAwareScheduling
from koord.scheduler.plugins.nodenumaresource import NAME as NODE_NUMA_RESOURCE
from koord.scheduler.plugins.nodenumaresource import NodeNUMAResource
from koord.scheduler.plugins.noderesources import (
    BALANCED,
    FIT,
    NodeResourcesBalancedAllocation,
    NodeResourcesFit,
)
from koord.scheduler.plugins.noderesourcesfitplus import NAME as FIT_PLUS
from koord.scheduler.plugins.noderesourcesfitplus import NodeResourcesFitPlus
from koord.scheduler.plugins.podtopologyspread import NAME as POD_TOPOLOGY_SPREAD
from koord.scheduler.plugins.podtopologyspread import PodTopologySpread
from koord.scheduler.plugins.reservation import NAME as RESERVATION
from koord.scheduler.plugins.reservation import Reservation
from koord.scheduler.plugins.scarceresourceavoidance import NAME as SCARCE_RESOURCE_AVOIDANCE
from koord.scheduler.plugins.scarceresourceavoidance import ScarceResourceAvoidance
from koord.scheduler.plugins.schedulinghint import NAME as SCHEDULING_HINT
from koord.scheduler.plugins.schedulinghint import SchedulingHint
from koordshared.runtime.pluginregistry import EntryPoints, Registry, discover

BUILTIN: Mapping[str, PluginFactory] = {
    schedulinggates.NAME: schedulinggates.SchedulingGates,
    queuesort.NAME: queuesort.PrioritySort,
    nodeunschedulable.NAME: nodeunschedulable.NodeUnschedulable,
    nodename.NAME: nodename.NodeName,
    tainttoleration.NAME: tainttoleration.TaintToleration,
    nodeaffinity.NAME: nodeaffinity.NodeAffinity,
    nodeports.NAME: nodeports.NodePorts,
    FIT: NodeResourcesFit,
    BALANCED: NodeResourcesBalancedAllocation,
    DEFAULT_PREEMPTION: DefaultPreemption,
    POD_TOPOLOGY_SPREAD: PodTopologySpread,
    INTER_POD_AFFINITY: InterPodAffinity,
    defaultprebind.NAME: defaultprebind.DefaultPreBind,
    defaultbinder.NAME: defaultbinder.DefaultBinder,
    volumebinding.NAME: volumebinding.VolumeBinding,
    LOAD_AWARE: LoadAwareScheduling,
    COSCHEDULING: Coscheduling,
    elasticquota.NAME: elasticquota.ElasticQuota,
    FIT_PLUS: NodeResourcesFitPlus,
    SCARCE_RESOURCE_AVOIDANCE: ScarceResourceAvoidance,
    SCHEDULING_HINT: SchedulingHint,
    DEVICE_SHARE: DeviceShare,
    NODE_NUMA_RESOURCE: NodeNUMAResource,
    RESERVATION: Reservation,
}


def plugin_registry(entry_points: EntryPoints | None = None) -> Registry:
    """The built-ins, then the installed plugins of :data:`ENTRY_POINT_GROUP` (and its old names)."""
    return discover(
        BUILTIN, ENTRY_POINT_GROUP, deprecated=DEPRECATED_ENTRY_POINT_GROUPS, entry_points=entry_points
    )
