"""Metrics in the contract: names a plugin queries the metric cache with, events it may subscribe to, and
the :class:`MetricRegistry` it exports its own Prometheus metrics through.

Metric kinds keep Koordinator's names and units: CPU in cores, memory in bytes, ``node_be`` in
millicores. ``labels`` of a query use Koordinator's property names (``pod_uid``, ``container_id``...).
The registry's vectors have the shape of ``prometheus_client``'s (the agent hands out real ones), so a
plugin needs no Prometheus import and tests read the values back from a real registry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

Aggregation = Literal["avg", "last", "count", "p50", "p90", "p95", "p99"]

# Metric kinds (Koordinator's names and units: CPU in cores, memory in bytes, node_be in millicores).
NODE_CPU_USAGE = "node_cpu_usage"
NODE_MEMORY_USAGE = "node_memory_usage"
SYS_CPU_USAGE = "sys_cpu_usage"
SYS_MEMORY_USAGE = "sys_memory_usage"
POD_CPU_USAGE = "pod_cpu_usage"
POD_MEMORY_USAGE = "pod_memory_usage"
CONTAINER_CPU_USAGE = "container_cpu_usage"
CONTAINER_MEMORY_USAGE = "container_memory_usage"
POD_CPU_THROTTLED = "pod_cpu_throttled"
CONTAINER_CPU_THROTTLED = "container_cpu_throttled"
NODE_BE = "node_be"
HOST_APP_CPU_USAGE = "host_application_cpu_usage"
HOST_APP_MEMORY_USAGE = "host_application_memory_usage"
NODE_CPU_USAGE_FAST = "node_cpu_usage_fast"
"""Node CPU (cores) from the fast sampler (~40 ms windows; a 10 ms confirm window after a rise); short
retention, for QoS reaction only."""
BE_CPU_USAGE_FAST = "be_cpu_usage_fast"
"""CPU (cores) of the besteffort tier from the fast sampler; pairs with ``NODE_CPU_USAGE_FAST``."""

EVENT_NODE_SAMPLE = "node_sample"
"""Fired after each fast node-level sample, once ``NODE_CPU_USAGE_FAST`` and ``BE_CPU_USAGE_FAST`` hold
it (used for sub-second reaction to LS load; the 1 s ``NODE_CPU_USAGE`` series keeps koordlet's meaning),
while some plugin wants fast samples (``PluginContext.want_fast_samples``)."""
EVENT_PODS_CHANGED = "pods_changed"
EVENT_NODE_SLO_CHANGED = "node_slo_changed"


def system_usage(node: float, pods: float, host_apps: float) -> float:
    """What the system (neither a pod nor a host application) uses: ``node - pods - host apps``, never
    below zero (koordlet's ``getSystemUsage``; any unit, as long as the three share it)."""
    return max(node - pods - host_apps, 0.0)


class GaugeChild(Protocol):
    """One labelled series of a :class:`GaugeVec`."""

    def set(self, value: float) -> None: ...


class GaugeVec(Protocol):
    """A gauge with labels (``prometheus_client.Gauge``, Prometheus' ``GaugeVec``)."""

    def labels(self, *values: str, **by_name: str) -> GaugeChild:
        """The series of these label values, given in order or by label name."""
        ...

    def remove(self, *values: str) -> None:
        """Forget a series (a pod that is gone), so ``/metrics`` stops showing it."""
        ...


class MetricRegistry(Protocol):
    """The agent's Prometheus registry as a plugin sees it (``ctx.registry``)."""

    def gauge(self, name: str, documentation: str, labels: Sequence[str]) -> GaugeVec:
        """The gauge ``name`` on the agent's ``/metrics``; asked again with the same labels, the same one.

        Raises ``ValueError`` when ``name`` is taken by another metric or asked with other labels.
        """
        ...
