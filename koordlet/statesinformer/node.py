"""The Node as the agent sees it: from the API object, or from local facts in standalone mode.

Capacity and allocatable become millicores and bytes; ``kubernetes.io/batch-cpu`` is already counted in
millicores (Koordinator's extended resource), ``kubernetes.io/batch-memory`` in bytes. Standalone, the
node has what this host has: online CPUs x 1000 and ``MemTotal``; allocatable equals capacity.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from koordlet import api
from koordlet.errors import InvalidValue
from koordlet.schema.pod import BATCH_CPU, BATCH_MEMORY
from koordlet.schema.quantity import to_int, to_milli
from koordlet.system.paths import HostPaths
from koordlet.system.procfs import read_meminfo
from koordlet.system.topology import read_online_cpus

log = logging.getLogger(__name__)


def _amount(values: Mapping[str, Any], name: str, *, milli: bool) -> int:
    raw = values.get(name)
    if raw is None:
        return 0
    try:
        return to_milli(raw) if milli else to_int(raw)
    except (InvalidValue, TypeError):
        log.warning("node: ignoring unparsable %s quantity %r", name, raw)
        return 0


def node_info(obj: Mapping[str, Any]) -> api.NodeInfo:
    """The :class:`api.NodeInfo` of a ``v1.Node`` JSON object."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    cap = status.get("capacity") or {}
    alloc = status.get("allocatable") or {}
    return api.NodeInfo(
        name=str(meta.get("name", "")),
        cpu_capacity_milli=_amount(cap, "cpu", milli=True),
        memory_capacity_bytes=_amount(cap, "memory", milli=False),
        cpu_allocatable_milli=_amount(alloc, "cpu", milli=True),
        memory_allocatable_bytes=_amount(alloc, "memory", milli=False),
        batch_cpu_allocatable_milli=_amount(alloc, BATCH_CPU, milli=False),
        batch_memory_allocatable_bytes=_amount(alloc, BATCH_MEMORY, milli=False),
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
    )


def local_node(name: str, paths: HostPaths) -> api.NodeInfo:
    """Standalone: capacity from the host (online CPUs, ``MemTotal``); allocatable = capacity."""
    cpus = len(read_online_cpus(paths)) * 1000
    mem = read_meminfo(paths).total
    return api.NodeInfo(
        name=name,
        cpu_capacity_milli=cpus,
        memory_capacity_bytes=mem,
        cpu_allocatable_milli=cpus,
        memory_allocatable_bytes=mem,
    )
