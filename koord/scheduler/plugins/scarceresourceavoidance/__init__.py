"""ScarceResourceAvoidance: keep pods that do not need a node's scarce resources (GPUs...) off that node
(Koordinator's ``pkg/scheduler/plugins/scarceresourceavoidance``, v1.8 semantics).

``args`` (fields, validation), ``plugin`` (PreScore and Score).
"""

from koord.scheduler.plugins.scarceresourceavoidance.plugin import NAME, ScarceResourceAvoidance

__all__ = ["NAME", "ScarceResourceAvoidance"]
