"""The stable plugin contract of koordlet: everything a QoS plugin may see. Stdlib only.

A QoS plugin is the Python form of Koordinator's ``ExtensionPlugin`` (``InitFlags``/``Setup``/``Run``) plus
a ``shutdown`` hook. The agent hands it a :class:`PluginContext` of read-only views (pods, node, NodeSLO,
metric cache, host facts), the one resource executor it must write through, the evictor, a clock, a
logger and a scheduler. Plugins import nothing of koordlet but this package (checked by import-linter),
so everything they need is declared here: value types are frozen dataclasses, services are Protocols.

A minimal third-party plugin (``tests/unit/koordlet/api/test_package.py`` runs this very text)::

    import threading

    from koordlet import api

    INTERVAL = api.Flag("hello-interval-seconds", float, 5.0, "how often to say hello")


    class Hello(api.QOSPluginBase):
        name = "Hello"
        feature = api.FeatureSpec(default=False, stage=api.Stage.ALPHA)

        def init_flags(self, flags: api.FlagSet) -> None:
            flags.add(INTERVAL)

        def run(self, stop: threading.Event) -> None:
            self.ctx.every(self.ctx.option(INTERVAL), self.reconcile)

        def reconcile(self) -> None:
            self.ctx.logger.info("%d pods on %s", len(self.ctx.states.pods()), self.ctx.node_name)

and in its distribution's ``pyproject.toml``::

    [project.entry-points."koordlet.qos_plugins"]
    Hello = "hello_plugin:Hello"

The entry-point name must equal the plugin's ``name``, which is also its gate key:
``koordlet run --qos-extension-plugins=Hello=true``. In-process code may instead call
:func:`register_qos_ext_plugin` before the agent starts. An incompatible change of this package bumps
:data:`API_VERSION`; additions do not.
"""

from __future__ import annotations

from koordlet.api.cpulist import MAX_CPU_ID, format_cpuset, parse_cpuset
from koordlet.api.errors import (
    CgroupGone,
    InvalidValue,
    KoordletError,
    PluginError,
    ResourceUnsupported,
    UnsafePath,
)
from koordlet.api.flags import FeatureSpec, Flag, FlagSet, FlagType, OptionValue, Stage
from koordlet.api.metrics import (
    BE_CPU_USAGE_FAST,
    CONTAINER_CPU_THROTTLED,
    CONTAINER_CPU_USAGE,
    CONTAINER_MEMORY_USAGE,
    EVENT_NODE_SAMPLE,
    EVENT_NODE_SLO_CHANGED,
    EVENT_PODS_CHANGED,
    HOST_APP_CPU_USAGE,
    HOST_APP_MEMORY_USAGE,
    NODE_BE,
    NODE_CPU_USAGE,
    NODE_CPU_USAGE_FAST,
    NODE_MEMORY_USAGE,
    POD_CPU_THROTTLED,
    POD_CPU_USAGE,
    POD_MEMORY_USAGE,
    SYS_CPU_USAGE,
    SYS_MEMORY_USAGE,
    Aggregation,
    GaugeChild,
    GaugeVec,
    MetricRegistry,
    system_usage,
)
from koordlet.api.netqos import (
    MIN_RATE_BPS,
    ClassLimit,
    DirectionSpec,
    IPAddress,
    NetQoSSpec,
    check_ifname,
    default_ifb,
)
from koordlet.api.plugin import (
    API_VERSION,
    AgentOptions,
    PluginContext,
    QOSPlugin,
    QOSPluginBase,
    Scheduler,
    StatusReporter,
)
from koordlet.api.registry import (
    REQUIRED_METHODS,
    register_qos_ext_plugin,
    registered_ext_plugins,
    unregister_qos_ext_plugin,
)
from koordlet.api.services import Evictor, HostReader, MetricReader, ResourceWriter, StatesReader
from koordlet.api.types import (
    BATCH_CPU,
    BATCH_MEMORY,
    CLASS_KEYS,
    CPUQOS,
    LABEL_EVICTION_ENABLED,
    MID_CPU,
    MID_MEMORY,
    NEVER_EVICTED_OWNERS,
    PRIORITY_VALUE_DEFAULTS,
    UNKNOWN,
    BlkIOQOS,
    BlockCfg,
    CgroupUpdate,
    ContainerInfo,
    CPUBurstStrategy,
    CPUInfo,
    HostApplication,
    IOCfg,
    JSONArray,
    JSONObject,
    JSONValue,
    KubeQOSClass,
    MemoryQOS,
    NetworkQOS,
    NodeInfo,
    NodeSLO,
    PodInfo,
    PriorityClass,
    QOSClass,
    QueryResult,
    ResctrlQOS,
    ResctrlUpdate,
    ResourceQOS,
    ResourceQOSPolicies,
    ResourceQOSStrategy,
    ResourceThresholdStrategy,
    SystemStrategy,
    UpdateResult,
    blocks,
    json_fields,
)

__all__ = [
    "API_VERSION",
    "BATCH_CPU",
    "BATCH_MEMORY",
    "BE_CPU_USAGE_FAST",
    "CLASS_KEYS",
    "CONTAINER_CPU_THROTTLED",
    "CONTAINER_CPU_USAGE",
    "CONTAINER_MEMORY_USAGE",
    "CPUQOS",
    "EVENT_NODE_SAMPLE",
    "EVENT_NODE_SLO_CHANGED",
    "EVENT_PODS_CHANGED",
    "HOST_APP_CPU_USAGE",
    "HOST_APP_MEMORY_USAGE",
    "LABEL_EVICTION_ENABLED",
    "MAX_CPU_ID",
    "MID_CPU",
    "MID_MEMORY",
    "MIN_RATE_BPS",
    "NEVER_EVICTED_OWNERS",
    "NODE_BE",
    "NODE_CPU_USAGE",
    "NODE_CPU_USAGE_FAST",
    "NODE_MEMORY_USAGE",
    "POD_CPU_THROTTLED",
    "POD_CPU_USAGE",
    "POD_MEMORY_USAGE",
    "PRIORITY_VALUE_DEFAULTS",
    "REQUIRED_METHODS",
    "SYS_CPU_USAGE",
    "SYS_MEMORY_USAGE",
    "UNKNOWN",
    "AgentOptions",
    "Aggregation",
    "BlkIOQOS",
    "BlockCfg",
    "CPUBurstStrategy",
    "CPUInfo",
    "CgroupGone",
    "CgroupUpdate",
    "ClassLimit",
    "ContainerInfo",
    "DirectionSpec",
    "Evictor",
    "FeatureSpec",
    "Flag",
    "FlagSet",
    "FlagType",
    "GaugeChild",
    "GaugeVec",
    "HostApplication",
    "HostReader",
    "IOCfg",
    "IPAddress",
    "InvalidValue",
    "JSONArray",
    "JSONObject",
    "JSONValue",
    "KoordletError",
    "KubeQOSClass",
    "MemoryQOS",
    "MetricReader",
    "MetricRegistry",
    "NetQoSSpec",
    "NetworkQOS",
    "NodeInfo",
    "NodeSLO",
    "OptionValue",
    "PluginContext",
    "PluginError",
    "PodInfo",
    "PriorityClass",
    "QOSClass",
    "QOSPlugin",
    "QOSPluginBase",
    "QueryResult",
    "ResctrlQOS",
    "ResctrlUpdate",
    "ResourceQOS",
    "ResourceQOSPolicies",
    "ResourceQOSStrategy",
    "ResourceThresholdStrategy",
    "ResourceUnsupported",
    "ResourceWriter",
    "Scheduler",
    "Stage",
    "StatesReader",
    "StatusReporter",
    "SystemStrategy",
    "UnsafePath",
    "UpdateResult",
    "blocks",
    "check_ifname",
    "default_ifb",
    "format_cpuset",
    "json_fields",
    "parse_cpuset",
    "register_qos_ext_plugin",
    "registered_ext_plugins",
    "system_usage",
    "unregister_qos_ext_plugin",
]
