"""NodeResourcesFitPlus: per-resource LeastAllocated or MostAllocated scoring, each resource with its own
strategy and weight (Koordinator's ``pkg/scheduler/plugins/noderesourcefitplus``, v1.8 semantics).

``args`` (fields, validation), ``plugin`` (PreScore and Score).
"""

from koord.scheduler.plugins.noderesourcesfitplus.plugin import NAME, NodeResourcesFitPlus

__all__ = ["NAME", "NodeResourcesFitPlus"]
