"""Memory QoS arithmetic of ``CgroupReconcile`` (Koordinator's
``pkg/koordlet/qosmanager/plugins/cgreconcile/cgroup_reconcile.go``), pure. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace

from koordlet import api

ANNOTATION = "koordinator.sh/memoryQOS"
UNLIMITED = "-1"


# Koordinator's DefaultMemoryQOS per class: what the pod policy "auto" starts from.
_LS_AUTO = api.MemoryQOS(wmark_ratio=95, wmark_scale_permill=20, wmark_min_adj=-25)
AUTO: Mapping[api.QOSClass, api.MemoryQOS] = {
    api.QOSClass.LSE: _LS_AUTO,
    api.QOSClass.LSR: _LS_AUTO,
    api.QOSClass.LS: _LS_AUTO,
    api.QOSClass.BE: api.MemoryQOS(wmark_ratio=95, wmark_scale_permill=20, wmark_min_adj=50),
    api.QOSClass.SYSTEM: api.MemoryQOS(),
}

KNOBS: Mapping[str, str] = {
    # resource -> api.MemoryQOS field, for the values written as configured
    "memory.wmark_ratio": "wmark_ratio",
    "memory.wmark_scale_factor": "wmark_scale_permill",
    "memory.wmark_min_adj": "wmark_min_adj",
    "memory.priority": "priority",
    "memory.use_priority_oom": "priority_enable",
}
TIER_KNOBS = ("memory.priority", "memory.use_priority_oom")


def overlay(base: api.MemoryQOS, annotation: api.JSONObject) -> api.MemoryQOS:
    """``base`` with the fields a pod's annotation sets (camelCase, as in the NodeSLO; fields of the
    wrong type are skipped)."""
    changes, _ = api.json_fields(api.MemoryQOS, annotation)
    return replace(base, **changes) if changes else base


def pod_config(pod: api.PodInfo, class_qos: api.MemoryQOS) -> api.MemoryQOS | None:
    """The pod's effective config, ``None`` when memory QoS is off for it (class disabled and no
    ``auto`` policy, or policy ``none``). A malformed annotation is ignored, as koordlet does."""
    node_cfg = class_qos if class_qos.enable else None
    raw = pod.annotations.get(ANNOTATION)
    if not raw:
        return node_cfg
    try:
        ann = json.loads(raw)
    except ValueError:
        return node_cfg
    if not isinstance(ann, dict):
        return node_cfg
    policy = ann.get("policy") or "default"
    if policy == "none":
        return None
    if policy == "auto":
        return overlay(AUTO.get(pod.qos, api.MemoryQOS()), ann)
    return overlay(node_cfg, ann) if node_cfg is not None else None


def pod_request(pod: api.PodInfo) -> int:
    return pod.batch_memory_request_bytes if pod.is_best_effort else pod.memory_request_bytes


def protection(request: int, c: api.MemoryQOS) -> tuple[int, int]:
    """``(memory.min, memory.low)`` for ``request`` bytes; low is never below min."""
    lo_min = max(request, 0) * c.min_limit_percent // 100
    low = max(request, 0) * c.low_limit_percent // 100
    if 0 < low < lo_min:
        low = lo_min
    return lo_min, low


def memory_high(request: int, limit: int, node_allocatable: int, c: api.MemoryQOS, page: int) -> int | None:
    """Container ``memory.high`` in bytes; ``None`` for no limit (``throttlingPercent`` 0)."""
    if c.throttling_percent == 0:
        return None
    request = max(request, 0)
    top = limit if limit > 0 else node_allocatable
    high = (request + (top - request) * c.throttling_percent // 100) // page * page
    lo_min, _ = protection(request, c)
    return max(high, lo_min)


def container_limits(pod: api.PodInfo, c: api.ContainerInfo) -> tuple[int, int]:
    """``(request, limit)`` of a container's memory (BE: its batch-memory), bytes; 0 when unset."""
    if pod.is_best_effort:
        return c.batch_memory_request_bytes, c.batch_memory_limit_bytes
    return c.memory_request_bytes, c.memory_limit_bytes
