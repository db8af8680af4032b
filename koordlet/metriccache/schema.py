"""Metric kinds, their property schemas, and the canonical series key built from a label set.

Koordlet accepts a sample only when its properties are exactly the kind's schema, and a query with any
subset of them. Series of one kind are keyed canonically so the collector's bulk path can hand in keys it
built once: a kind with one property is keyed by that property's value (``"<pod uid>"``), a kind with none
by ``()``, and any other kind by the ``(name, value)`` pairs sorted by name.
"""

from __future__ import annotations

from collections.abc import Mapping

from koordlet import api
from koordshared.runtime.errors import InvalidValue

SeriesKey = str | tuple[tuple[str, str], ...]
"""Canonical key of one series within a kind (see the module docstring)."""

_NONE: tuple[str, ...] = ()
_POD = ("pod_uid",)
_CONTAINER = ("container_id",)
_NUMA = ("numa_node_id",)
_GPU = ("gpu_minor", "gpu_device_uuid")
_HOST_APP = ("host_app_name",)
_PSI = ("psi_resource", "psi_precision", "psi_degree")

NODE_MEMORY_USAGE_WITH_PAGE_CACHE = "node_memory_usage_with_page_cache"
NODE_MEMORY_WITH_HOT_PAGE_USAGE = "node_memory_with_hot_page_usage"
NODE_NUMA_CPU_USAGE = "node_numa_cpu_usage"
NODE_NUMA_MEMORY_USAGE = "node_numa_memory_usage"
SYS_NUMA_CPU_USAGE = "sys_numa_cpu_usage"
SYS_NUMA_MEMORY_USAGE = "sys_numa_memory_usage"
POD_MEMORY_USAGE_WITH_PAGE_CACHE = "pod_memory_usage_with_page_cache"
CONTAINER_MEMORY_USAGE_WITH_PAGE_CACHE = "container_memory_usage_with_page_cache"
CONTAINER_PSI = "container_psi"
POD_PSI = "pod_psi"
CONTAINER_CPI = "container_cpi"

PROPERTIES: dict[str, tuple[str, ...]] = {
    api.NODE_CPU_USAGE: _NONE,
    api.NODE_MEMORY_USAGE: _NONE,
    NODE_MEMORY_USAGE_WITH_PAGE_CACHE: _NONE,
    NODE_MEMORY_WITH_HOT_PAGE_USAGE: _NONE,
    "node_memory_cold_page_size": _NONE,
    NODE_NUMA_CPU_USAGE: _NUMA,
    NODE_NUMA_MEMORY_USAGE: _NUMA,
    SYS_NUMA_CPU_USAGE: _NUMA,
    SYS_NUMA_MEMORY_USAGE: _NUMA,
    "node_gpu_core_usage": _GPU,
    "node_gpu_memory_usage": _GPU,
    "node_gpu_memory_total": _GPU,
    api.SYS_CPU_USAGE: _NONE,
    api.SYS_MEMORY_USAGE: _NONE,
    api.NODE_BE: ("be_resource", "be_allocation"),
    api.POD_CPU_USAGE: _POD,
    api.POD_MEMORY_USAGE: _POD,
    POD_MEMORY_USAGE_WITH_PAGE_CACHE: _POD,
    api.POD_CPU_THROTTLED: _POD,
    "pod_memory_with_hot_page_usage": _POD,
    "pod_memory_cold_page_size": _POD,
    "pod_psi_cpu_full_supported": _POD,
    "pod_gpu_core_usage": ("pod_uid", *_GPU),
    "pod_gpu_memory_usage": ("pod_uid", *_GPU),
    api.CONTAINER_CPU_USAGE: _CONTAINER,
    api.CONTAINER_MEMORY_USAGE: _CONTAINER,
    CONTAINER_MEMORY_USAGE_WITH_PAGE_CACHE: _CONTAINER,
    api.CONTAINER_CPU_THROTTLED: _CONTAINER,
    "container_memory_with_hot_page_usage": _CONTAINER,
    "container_memory_cold_page_size": _CONTAINER,
    "container_gpu_core_usage": ("container_id", *_GPU),
    "container_gpu_memory_usage": ("container_id", *_GPU),
    CONTAINER_CPI: ("pod_uid", "container_id", "cpi_resource"),
    CONTAINER_PSI: ("pod_uid", "container_id", *_PSI),
    "container_psi_cpu_full_supported": ("pod_uid", "container_id"),
    POD_PSI: ("pod_uid", *_PSI),
    api.HOST_APP_CPU_USAGE: _HOST_APP,
    api.HOST_APP_MEMORY_USAGE: _HOST_APP,
    "host_application_memory_usage_with_page_cache": _HOST_APP,
    "host_application_memory_with_hot_page_usage": _HOST_APP,
    "host_application_memory_cold_page_size": _HOST_APP,
    "resctrl_resource_llc": ("qos", "cache_id"),
    # Koordlet's collector also sets resctrl_type=mb, which its own schema rejects; we take the schema.
    "resctrl_resource_mb": ("qos", "cache_id", "resctrl_mb_type"),
}


def series_key(metric: str, labels: Mapping[str, str] | None) -> SeriesKey:
    """The canonical key of the series ``labels`` of ``metric``; checks a known kind's schema exactly."""
    labels = labels or {}
    props = PROPERTIES.get(metric)
    if props is not None:
        if len(labels) != len(props) or any(p not in labels for p in props):
            raise InvalidValue(metric, dict(labels), f"properties must be exactly {list(props)}")
        if len(props) == 1:
            return str(labels[props[0]])
    return tuple(sorted((str(k), str(v)) for k, v in labels.items()))


def normalize_key(metric: str, key: SeriesKey) -> SeriesKey:
    """Turn a caller's key (a bare value, or pairs in any order) into the canonical one."""
    if isinstance(key, str):
        props = PROPERTIES.get(metric)
        if props is None or len(props) != 1:
            raise InvalidValue(metric, key, "a bare value key needs a kind with exactly one property")
        return key
    return series_key(metric, dict(key))


def key_labels(metric: str, key: SeriesKey) -> dict[str, str]:
    """The label set a canonical key stands for."""
    if isinstance(key, str):
        return {PROPERTIES[metric][0]: key}
    return dict(key)
