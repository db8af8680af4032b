"""Names a plugin queries the metric cache with, and the in-process events it may subscribe to.

Metric kinds keep Koordinator's names and units: CPU in cores, memory in bytes, ``node_be`` in
millicores. ``labels`` of a query use Koordinator's property names (``pod_uid``, ``container_id``...).
"""

from __future__ import annotations

from typing import Literal

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
"""Node CPU (cores) from the fast sampler (~100 ms windows); short retention, for QoS reaction only."""
BE_CPU_USAGE_FAST = "be_cpu_usage_fast"
"""CPU (cores) of the besteffort tier from the fast sampler; pairs with ``NODE_CPU_USAGE_FAST``."""

EVENT_NODE_SAMPLE = "node_sample"
"""Fired after each fast node-level sample, once ``NODE_CPU_USAGE_FAST`` and ``BE_CPU_USAGE_FAST`` hold
it (used for sub-second reaction to LS load; the 1 s ``NODE_CPU_USAGE`` series keeps koordlet's meaning)."""
EVENT_PODS_CHANGED = "pods_changed"
EVENT_NODE_SLO_CHANGED = "node_slo_changed"
