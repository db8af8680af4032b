"""The built-in scheduler plugins, written out (no registration on import side effects).

Third-party plugins register through the ``koord.scheduler_plugins`` entry-point group instead.
"""

import importlib
from collections.abc import Mapping
from typing import Any

from koord.scheduler.framework import DEPRECATED_ENTRY_POINT_GROUPS, ENTRY_POINT_GROUP, PluginFactory
from koordshared.runtime.pluginregistry import EntryPoints, Registry, discover

_PLUGINS = "koord.scheduler.plugins"


class Builtin:
    """A built-in plugin's factory that imports its module when a profile first builds the plugin: a
    process loads the plugins its profiles enable, not all of them (numpy-heavy Koordinator plugins
    cost a default-profile scheduler's start nothing)."""

    __slots__ = ("attr", "module")

    def __init__(self, module: str, attr: str) -> None:
        self.module, self.attr = f"{_PLUGINS}.{module}", attr

    def load(self) -> PluginFactory:
        factory: PluginFactory = getattr(importlib.import_module(self.module), self.attr)
        return factory

    def __call__(self, args: Mapping[str, Any] | None, handle: Any) -> Any:
        return self.load()(args, handle)

    def __repr__(self) -> str:
        return f"{self.module}.{self.attr}"


BUILTIN: Mapping[str, Builtin] = {
    "SchedulingGates": Builtin("schedulinggates", "SchedulingGates"),
    "PrioritySort": Builtin("queuesort", "PrioritySort"),
    "NodeUnschedulable": Builtin("nodeunschedulable", "NodeUnschedulable"),
    "NodeName": Builtin("nodename", "NodeName"),
    "TaintToleration": Builtin("tainttoleration", "TaintToleration"),
    "NodeAffinity": Builtin("nodeaffinity", "NodeAffinity"),
    "NodePorts": Builtin("nodeports", "NodePorts"),
    "NodeResourcesFit": Builtin("noderesources", "NodeResourcesFit"),
    "NodeResourcesBalancedAllocation": Builtin("noderesources", "NodeResourcesBalancedAllocation"),
    "DefaultPreemption": Builtin("defaultpreemption", "DefaultPreemption"),
    "PodTopologySpread": Builtin("podtopologyspread", "PodTopologySpread"),
    "InterPodAffinity": Builtin("interpodaffinity", "InterPodAffinity"),
    "DefaultPreBind": Builtin("defaultprebind", "DefaultPreBind"),
    "DefaultBinder": Builtin("defaultbinder", "DefaultBinder"),
    "VolumeBinding": Builtin("volumebinding", "VolumeBinding"),
    "LoadAwareScheduling": Builtin("loadaware", "LoadAwareScheduling"),
    "Coscheduling": Builtin("coscheduling", "Coscheduling"),
    "ElasticQuota": Builtin("elasticquota", "ElasticQuota"),
    "NodeResourcesFitPlus": Builtin("noderesourcesfitplus", "NodeResourcesFitPlus"),
    "ScarceResourceAvoidance": Builtin("scarceresourceavoidance", "ScarceResourceAvoidance"),
    "SchedulingHint": Builtin("schedulinghint", "SchedulingHint"),
    "DeviceShare": Builtin("deviceshare", "DeviceShare"),
    "NodeNUMAResource": Builtin("nodenumaresource", "NodeNUMAResource"),
    "Reservation": Builtin("reservation", "Reservation"),
}
"""Every built-in plugin by name, each imported on first use."""


def plugin_registry(entry_points: EntryPoints | None = None) -> Registry:
    """The built-ins, then the installed plugins of :data:`ENTRY_POINT_GROUP` (and its old names)."""
    return discover(
        BUILTIN, ENTRY_POINT_GROUP, deprecated=DEPRECATED_ENTRY_POINT_GROUPS, entry_points=entry_points
    )
