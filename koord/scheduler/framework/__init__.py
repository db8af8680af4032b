"""The scheduler-plugin framework hosted by the extender: the contract plugin authors import.

A plugin is a class with a ``name`` and any of ``pre_filter``, ``filter``, ``pre_score``, ``score``,
``normalize_score``, ``reserve``/``unreserve`` (:mod:`.interface`); a factory ``(args, handle)`` builds it
(:mod:`.registry`, built-ins plus the ``koordlet.scheduler_plugins`` entry points); the profile
(:mod:`.profile`, KubeSchedulerConfiguration's shape) enables plugins per extension point with weights
and args; :mod:`.runtime` runs them. Nothing here talks to the API server.
"""

from koord.runtime.errors import InvalidArgs
from koord.scheduler.framework.interface import (
    EXTENSION_POINTS,
    MAX_EXTENDER_PRIORITY,
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    SKIP,
    BatchFilterPlugin,
    BatchScorePlugin,
    Code,
    CycleState,
    FilterPlugin,
    Handle,
    NodeDebugPlugin,
    NodeInfo,
    NormalizeScorePlugin,
    Obj,
    Plugin,
    PluginFactory,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
    Status,
)

__all__ = [
    "EXTENSION_POINTS",
    "MAX_EXTENDER_PRIORITY",
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "SKIP",
    "BatchFilterPlugin",
    "BatchScorePlugin",
    "Code",
    "CycleState",
    "FilterPlugin",
    "Handle",
    "InvalidArgs",
    "NodeDebugPlugin",
    "NodeInfo",
    "NormalizeScorePlugin",
    "Obj",
    "Plugin",
    "PluginFactory",
    "PreFilterPlugin",
    "PreScorePlugin",
    "ReservePlugin",
    "ScorePlugin",
    "Status",
]
