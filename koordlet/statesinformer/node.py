"""The Node as the agent sees it: from the API object, or from local facts in standalone mode.

Capacity and allocatable become millicores and bytes; ``kubernetes.io/batch-cpu`` is already counted in
millicores (Koordinator's extended resource), ``kubernetes.io/batch-memory`` in bytes. The
``node.koordinator.sh/reservation`` annotation is parsed here too, so plugins get its CPUs typed.
Standalone, the node has what this host has: online CPUs x 1000 and ``MemTotal``; allocatable equals
capacity.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from koordlet import api
from koordlet.statesinformer.podinfo import resource_amount
from koordlet.system.paths import HostPaths
from koordlet.system.procfs import read_meminfo
from koordlet.system.topology import read_online_cpus
from koordshared.apis.extension.qos import BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY
from koordshared.runtime.errors import InvalidValue

log = logging.getLogger(__name__)

RESERVATION_ANNOTATION = "node.koordinator.sh/reservation"
CPU_MANAGER_POLICY_ANNOTATION = "kubelet.koordinator.sh/cpu-manager-policy"


def kubelet_cpu_manager_policy(annotations: Mapping[str, str], paths: HostPaths | None) -> str:
    """The kubelet's CPU manager policy: Koordinator's ``kubelet.koordinator.sh/cpu-manager-policy``
    annotation (``{"policy": "static"}``) when the node carries it, else the ``policyName`` of the
    kubelet's own checkpoint (Koordinator asks the kubelet's ``/configz``, which we do not); empty when
    neither says."""
    for text, key in (
        (annotations.get(CPU_MANAGER_POLICY_ANNOTATION), "policy"),
        (_read_text(paths.kubelet_cpu_manager_state()) if paths is not None else None, "policyName"),
    ):
        if not text:
            continue
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if isinstance(doc, Mapping) and isinstance(doc.get(key), str):
            return str(doc[key])
    return ""


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # no kubelet checkpoint here (not a kubelet node, or not mounted): unknown


def _reservation(annotations: Mapping[str, str]) -> tuple[int, frozenset[int]]:
    """``(cpu millicores, pinned CPUs)`` of Koordinator's node reservation annotation (none if unreadable)."""
    text = annotations.get(RESERVATION_ANNOTATION)
    if not text:
        return 0, frozenset()
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, Mapping):
        log.warning("node: ignoring %s, not a JSON object: %r", RESERVATION_ANNOTATION, text[:200])
        return 0, frozenset()
    resources = doc.get("resources")
    if not isinstance(resources, Mapping):
        resources = {}
    milli = resource_amount(resources, "cpu", milli=True, where=f"node {RESERVATION_ANNOTATION}")
    cpus: frozenset[int] = frozenset()
    pinned = doc.get("reservedCPUs")
    if isinstance(pinned, str):
        try:
            cpus = api.parse_cpuset(pinned, resource=f"{RESERVATION_ANNOTATION} reservedCPUs")
        except InvalidValue as err:
            log.warning("node: ignoring reservedCPUs: %s", err)
    return milli, cpus


def node_info(obj: Mapping[str, Any], paths: HostPaths | None = None) -> api.NodeInfo:
    """The :class:`api.NodeInfo` of a ``v1.Node`` JSON object (``paths``: where the kubelet's CPU
    manager checkpoint may be read)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    cap = status.get("capacity") or {}
    alloc = status.get("allocatable") or {}
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    reservation_milli, reserved_cpus = _reservation(annotations)
    return api.NodeInfo(
        name=str(meta.get("name", "")),
        cpu_capacity_milli=resource_amount(cap, "cpu", milli=True, where="node"),
        memory_capacity_bytes=resource_amount(cap, "memory", milli=False, where="node"),
        cpu_allocatable_milli=resource_amount(alloc, "cpu", milli=True, where="node"),
        memory_allocatable_bytes=resource_amount(alloc, "memory", milli=False, where="node"),
        # Absent is not zero: the allocatable strategies treat an unreported extended resource as unknown.
        batch_cpu_allocatable_milli=_extended(alloc, BATCH_CPU),
        batch_memory_allocatable_bytes=_extended(alloc, BATCH_MEMORY),
        mid_cpu_allocatable_milli=_extended(alloc, MID_CPU),
        mid_memory_allocatable_bytes=_extended(alloc, MID_MEMORY),
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        annotations=annotations,
        reservation_cpu_milli=reservation_milli,
        reserved_cpus=reserved_cpus,
        kubelet_cpu_manager_policy=kubelet_cpu_manager_policy(annotations, paths),
    )


def _extended(alloc: Mapping[str, Any], name: str) -> int:
    """An extended resource's allocatable (batch-cpu and mid-cpu are counted in millicores already);
    :data:`api.UNKNOWN` when the Node does not report it."""
    return resource_amount(alloc, name, milli=False, where="node") if name in alloc else api.UNKNOWN


def local_node(name: str, paths: HostPaths) -> api.NodeInfo:
    """Standalone: capacity from the host (online CPUs, ``MemTotal``); allocatable = capacity. No Node
    reports batch or mid allocatable, so they stay :data:`api.UNKNOWN` (never the 0 that would tell the
    allocatable strategies BE has no room at all)."""
    cpus = len(read_online_cpus(paths)) * 1000
    mem = read_meminfo(paths).total
    return api.NodeInfo(
        name=name,
        cpu_capacity_milli=cpus,
        memory_capacity_bytes=mem,
        cpu_allocatable_milli=cpus,
        memory_allocatable_bytes=mem,
        kubelet_cpu_manager_policy=kubelet_cpu_manager_policy({}, paths),
    )
