"""The scheduling framework: the contract scheduler plugin authors import (kube-scheduler's
``framework`` package with Koordinator's extensions), hosted by koord-scheduler and by the extender
front end.

A plugin is a class with a ``name`` and any of the extension-point methods of :mod:`.interface`
(``less``, ``pre_enqueue``, ``pre_filter``, ``filter``, ``post_filter``, ``pre_score``, ``score``,
``normalize_score``, ``reserve``/``unreserve``, ``permit``, ``pre_bind``, ``bind``, ``post_bind``; batch
forms ``filter_nodes``/``score_nodes`` over a :class:`NodeSet`), built by a factory ``(args, handle)``
(the built-ins plus the entry points of :data:`ENTRY_POINT_GROUP`). The profile
(:mod:`.profile`) enables plugins per extension point with weights and args; the :class:`Framework`
(:mod:`.runtime`) runs them; :mod:`.snapshot` is what one cycle sees, with node state in
arrays; :mod:`.events` the cluster events and queueing hints a plugin registers; :mod:`.extension`
Koordinator's FrameworkExtender, with the reservation hooks over :class:`ReservationInfo`
(:mod:`.reservation`). Nothing here talks to the API server.
"""

from koord.scheduler.framework.events import (
    QUEUE,
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
)
from koord.scheduler.framework.interface import (
    EXTENSION_POINTS,
    MAX_EXTENDER_PRIORITY,
    MAX_NODE_SCORE,
    MAX_PERMIT_WAIT,
    MIN_NODE_SCORE,
    SKIP,
    BatchFilterPlugin,
    BatchScorePlugin,
    BindPlugin,
    Code,
    CodedVerdicts,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    NodeDebugPlugin,
    NormalizeScorePlugin,
    PermitPlugin,
    Plugin,
    PluginFactory,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    SchedulerHandle,
    ScorePlugin,
    Status,
    Store,
    WaitingPod,
)
from koord.scheduler.framework.reservation import PodRequirement, ReservationInfo
from koord.scheduler.framework.snapshot import NodeSet, Snapshot
from koord.scheduler.framework.types import NodeInfo, Obj, PodInfo, PostFilterResult, PreFilterResult
from koordshared.runtime.errors import InvalidArgs

ENTRY_POINT_GROUP = "koord.scheduler_plugins"
"""Where a distribution declares its scheduler plugins: name = factory ``(args, handle)``."""
DEPRECATED_ENTRY_POINT_GROUPS = ("koordlet.scheduler_plugins",)
"""The group's old names, still read (with a deprecation line)."""

__all__ = [
    "DEPRECATED_ENTRY_POINT_GROUPS",
    "ENTRY_POINT_GROUP",
    "EXTENSION_POINTS",
    "MAX_EXTENDER_PRIORITY",
    "MAX_NODE_SCORE",
    "MAX_PERMIT_WAIT",
    "MIN_NODE_SCORE",
    "QUEUE",
    "SKIP",
    "Action",
    "BatchFilterPlugin",
    "BatchScorePlugin",
    "BindPlugin",
    "ClusterEvent",
    "ClusterEventWithHint",
    "Code",
    "CodedVerdicts",
    "CycleState",
    "EnqueueExtensions",
    "FilterPlugin",
    "Handle",
    "InvalidArgs",
    "NodeDebugPlugin",
    "NodeInfo",
    "NodeSet",
    "NormalizeScorePlugin",
    "Obj",
    "PermitPlugin",
    "Plugin",
    "PluginFactory",
    "PodInfo",
    "PodRequirement",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterExtensions",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "QueueSortPlugin",
    "QueueingHint",
    "ReservationInfo",
    "ReservePlugin",
    "SchedulerHandle",
    "ScorePlugin",
    "Snapshot",
    "Status",
    "Store",
    "WaitingPod",
]
