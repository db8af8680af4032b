"""DeviceShare's per-node device cache (Koordinator's ``nodeDeviceCache`` and its event handlers): built from
the Device objects, and from the pods bound to each node with the allocation their
``scheduling.koordinator.sh/device-allocated`` annotation records (so a restarted scheduler knows what is
taken), plus the allocations of pods being scheduled (Reserve, until the pod is bound or given up).

A deleted Device leaves its node's devices in place but unhealthy (nothing allocatable) until it comes back,
as in Koordinator: the node agent recreates it, and until then the GPUs must not be handed out twice. A
node's entry goes when its Node object is deleted (Koordinator sweeps entries of missing nodes every 3 s).
A pod's allocation is released from what was counted for it, so a pod whose annotation was removed or
rewritten still gives back exactly what it held. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from koord.scheduler.plugins.deviceshare.alike import device_spec
from koord.scheduler.plugins.deviceshare.gputopology import partition_indexer, topology_tree
from koord.scheduler.plugins.deviceshare.nodedevice import NodeDevice, pcie_groups
from koord.scheduler.plugins.deviceshare.resources import ByType
from koordshared.apis.core.pod import annotations_of, as_map, pod_key
from koordshared.apis.extension.deviceshare import (
    ANNOTATION_DEVICE_ALLOCATED,
    DeviceAllocation,
    parse_device_allocations,
)
from koordshared.apis.scheduling import device as dv
from koordshared.apis.scheduling import reservation as rsv
from koordshared.apis.scheduling.reservation import reserve_pod
from koordshared.runtime.errors import InvalidValue

log = logging.getLogger(__name__)
LOG_SIZE = 8192
"""Node changes remembered for :meth:`DeviceCache.changed_since`; half forgotten past this."""
TERMINATED = ("Succeeded", "Failed")


def device_resources(infos: Sequence[dv.DeviceInfo]) -> ByType:
    """``buildDeviceResources``: each device's resources by type and minor; an unhealthy one has none."""
    out: ByType = {}
    for d in infos:
        out.setdefault(d.type, {})[d.minor] = dict(d.resources) if d.health else {}
    return out


def pod_allocations(pod: Mapping[str, Any]) -> dict[str, list[DeviceAllocation]]:
    """The pod's recorded allocation (empty: none); an unreadable one is logged and counts as none, as
    Koordinator's informer handler skips it."""
    try:
        return parse_device_allocations(annotations_of(pod)) or {}
    except InvalidValue as err:
        log.error("pod %s: %s", pod_key(pod), err)
        return {}


def _active(reservation: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The reserve pod of an available reservation (placed, holding its devices), else ``None``."""
    return reserve_pod(reservation) if reservation is not None and rsv.is_available(reservation) else None


def _node_of(pod: Mapping[str, Any] | None) -> str:
    return str(as_map(pod, "spec").get("nodeName") or "") if pod is not None else ""


class DeviceCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, NodeDevice] = {}
        self._where: dict[str, str] = {}
        """``namespace/name`` -> the node its counted allocation is on."""
        # The nodes whose devices or allocations changed, in order (absolute positions from _log_base),
        # each logged once the change is made: what keeps answers per node catches up on them.
        self._log: list[str] = []
        self._log_base = 0
        self._written: dict[str, tuple[str, str]] = {}
        """``namespace/name`` -> the node and the allocation annotation PreBind wrote for what is counted
        there, until the pod is seen bound with it."""

    def get(self, node: str) -> NodeDevice | None:
        with self._lock:
            return self._nodes.get(node)

    def changed_since(self, position: int) -> tuple[set[str] | None, int]:
        """The nodes changed since log ``position`` (``None``: too long ago to say, take them all as
        changed), and the position now."""
        with self._lock:
            now = self._log_base + len(self._log)
            start = position - self._log_base
            return (set(self._log[start:]) if start >= 0 else None), now

    def _changed(self, node: str) -> None:
        with self._lock:
            self._log.append(node)
            if len(self._log) > LOG_SIZE:
                drop = len(self._log) // 2
                del self._log[:drop]
                self._log_base += drop

    def versions(self, nodes: Sequence[str]) -> list[int]:
        """Each node's :attr:`NodeDevice.version` (0: no devices known)."""
        with self._lock:
            got = [self._nodes.get(n) for n in nodes]
        return [0 if nd is None else nd.version for nd in got]

    def nodes(self) -> list[str]:
        with self._lock:
            return list(self._nodes)

    def _ensure(self, node: str) -> NodeDevice:
        with self._lock:
            nd = self._nodes.get(node)
            if nd is None:
                nd = self._nodes[node] = NodeDevice()
            return nd

    # ---- Device objects -----------------------------------------------------------------------------

    def device_changed(self, device: Mapping[str, Any]) -> None:
        """``updateNodeDevice``: a Device was added or updated."""
        name = str(as_map(device, "metadata").get("name") or "")
        if not name:
            return
        infos = dv.device_infos(device)
        total = device_resources(infos)
        by_type: dict[str, list[dv.DeviceInfo]] = {}
        for d in infos:
            by_type.setdefault(d.type, []).append(d)
        try:
            table = dv.gpu_partition_table(device)
        except (ValueError, InvalidValue) as err:
            log.error("Device %s: invalid gpu partition table: %s", name, err)
            table = None
        tree = topology_tree(by_type.get(dv.GPU, []), total.get(dv.GPU, {}))
        nd = self._ensure(name)
        with nd.lock:
            nd.reset_total(total)
            nd.infos = by_type
            nd.pcies = pcie_groups(infos)
            nd.gpu_partitions = partition_indexer(table)
            nd.honor_gpu_partition = dv.partition_policy(device) == dv.PARTITION_POLICY_HONOR
            nd.secondary_well_planned = dv.secondary_device_well_planned(device)
            nd.gpu_topology = tree
            nd.changed()  # what was worked out between reset_total and here saw half a change
            device_spec(nd)
        self._changed(name)

    def device_deleted(self, device: Mapping[str, Any]) -> None:
        """``invalidateNodeDevice``: every device of the node becomes unhealthy."""
        nd = self.get(str(as_map(device, "metadata").get("name") or ""))
        if nd is None:
            return
        total = device_resources([dv.DeviceInfo(d.type, d.minor) for d in dv.device_infos(device)])
        with nd.lock:
            nd.reset_total(total)
        self._changed(str(as_map(device, "metadata").get("name") or ""))

    def node_deleted(self, node: Mapping[str, Any]) -> None:
        name = str(as_map(node, "metadata").get("name") or "")
        with self._lock:
            self._nodes.pop(name, None)
            for key in [k for k, n in self._where.items() if n == name]:
                del self._where[key]
        self._changed(name)

    # ---- allocations --------------------------------------------------------------------------------

    def count(self, node: str, allocations: Mapping[str, Sequence[DeviceAllocation]], key: str) -> None:
        """Count a pod's allocation on ``node`` (Reserve, or a bound pod seen by the informer)."""
        nd = self._ensure(node)
        with nd.lock:
            nd.update_used(allocations, key, True)
        with self._lock:
            self._where[key] = node
        self._changed(node)

    def written(self, key: str, node: str, text: str) -> None:
        """PreBind wrote ``text`` as the pod's allocation annotation: the allocation counted on ``node``."""
        with self._lock:
            if self._where.get(key) == node:
                self._written[key] = (node, text)

    def _written_back(self, key: str, node: str, pod: Mapping[str, Any]) -> bool:
        """Whether the pod arrives bound to ``node`` with the annotation PreBind wrote for what is counted
        there: counting it would change nothing (a pod is not counted twice), nor need it be parsed."""
        text = annotations_of(pod).get(ANNOTATION_DEVICE_ALLOCATED)
        with self._lock:
            if self._written.get(key) != (node, text) or self._where.get(key) != node:
                return False
            del self._written[key]
            return True

    def release(self, key: str, node: str = "") -> None:
        """Release what is counted for the pod (on ``node``, or wherever it is)."""
        with self._lock:
            self._written.pop(key, None)
            node = node or self._where.get(key, "")
            nd = self._nodes.get(node)
        if nd is None:
            return
        with nd.lock:
            nd.release(key)
            left = any(key in pods for pods in nd.allocate_set.values())
        self._changed(node)
        if not left:
            with self._lock:
                if self._where.get(key) == node:
                    del self._where[key]

    def pod_added(self, pod: Mapping[str, Any]) -> None:
        self.pod_updated(None, pod)

    def pod_updated(self, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        """``updatePod``: a bound pod counts what its annotation records; an unbound or finished one
        nothing."""
        key, node = pod_key(new), _node_of(new)
        if not node:
            if _node_of(old):
                self.release(key, _node_of(old))
            return
        if as_map(new, "status").get("phase") in TERMINATED:
            self.release(key, node)
            return
        if not _node_of(old) and self._written_back(key, node, new):
            return
        allocations = pod_allocations(new)
        # What the pod held before counts only if it was on a node (a pod being bound was not).
        before = pod_allocations(old) if old is not None and _node_of(old) else {}
        if not allocations and not before:
            return
        if before and _node_of(old):
            self.release(key, node)
        if allocations:
            self.count(node, allocations, key)

    def reservation_changed(self, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        before, after = _active(old), _active(new)
        if after is not None:
            self.pod_updated(before, after)
        elif before is not None:
            self.pod_deleted(before)

    def reservation_deleted(self, reservation: Mapping[str, Any]) -> None:
        self.pod_deleted(reserve_pod(reservation))

    def pod_deleted(self, pod: Mapping[str, Any]) -> None:
        node = _node_of(pod)
        if node:
            self.release(pod_key(pod), node)

    def forget(self, pod: Mapping[str, Any]) -> None:
        """An assumed pod given up: whatever is still counted for it goes (Unreserve usually released it)."""
        self.release(pod_key(pod))
