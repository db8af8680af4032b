"""One node's devices as DeviceShare keeps them (Koordinator's ``nodeDevice``): what each device has
(``total``: a healthy device's resources, nothing for an unhealthy one), what the pods on the node hold
(``used``, and per pod in ``allocate_set``), what is left (``free``), the virtual functions taken, and what
the node's Device object says of the devices (their labels and topology, the GPU partition table, the GPU
topology tree).

:meth:`NodeDevice.filter` gives the view one allocation works on: only some devices (a selector, a NUMA
node), with resources of pods that may be preempted, or of the pod's matched reservations, counted as free,
and capped at what a reservation holds when it must allocate from it. A NodeDevice is guarded by its
``lock``; the views are private copies.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koord.scheduler.plugins.deviceshare import resources as rs
from koord.scheduler.plugins.deviceshare.resources import ByType, Devices
from koordshared.apis.extension.deviceshare import PCIE_LEVEL_EXCLUSIVE, DeviceAllocation, DeviceHint
from koordshared.apis.scheduling.device import DeviceInfo

MEMO_SIZE = 64
"""Pod shapes remembered per node (a few in a steady workload); all forgotten past this."""
_VERSIONS = itertools.count(1)


def memo_key(kind: str, signature: str, generation: int, node: Any) -> tuple[str, str, int, int]:
    """The key of a remembered ``kind`` ("filter", "score") answer for pods of ``signature`` with the GPU
    templates of ``generation`` on the node object ``node`` (kept beside the answer, so the id stays its)."""
    return kind, signature, generation, id(node)


@dataclass(frozen=True, slots=True)
class PCIe:
    """The devices behind one PCIe switch (Koordinator's ``PCIe`` of its ``NUMATopology``)."""

    socket: int
    node: int
    pcie: str
    devices: Mapping[str, tuple[int, ...]]


def pcie_groups(infos: Sequence[DeviceInfo]) -> list[PCIe]:
    """The devices grouped by PCIe switch; devices without topology, or on NUMA node -1, are left out."""
    groups: dict[tuple[int, int, str], dict[str, list[int]]] = {}
    for d in infos:
        if d.topology is None or d.topology.node_id == -1:
            continue
        key = (d.topology.socket_id, d.topology.node_id, d.topology.pcie_id)
        groups.setdefault(key, {}).setdefault(d.type, []).append(d.minor)
    return [PCIe(s, n, p, {t: tuple(m) for t, m in devs.items()}) for (s, n, p), devs in groups.items()]


@dataclass(eq=False)
class NodeDevice:
    total: ByType = field(default_factory=dict)
    free: ByType = field(default_factory=dict)
    used: ByType = field(default_factory=dict)
    vfs: dict[str, dict[int, set[str]]] = field(default_factory=dict)
    """Device type -> minor -> bus ids of the virtual functions allocated on it."""
    allocate_set: dict[str, dict[str, Devices]] = field(default_factory=dict)
    """Device type -> ``namespace/name`` -> what the pod holds."""
    records: dict[str, dict[str, list[DeviceAllocation]]] = field(default_factory=dict)
    """``namespace/name`` -> the allocation counted for the pod, as it was given (to release it exactly)."""
    infos: dict[str, list[DeviceInfo]] = field(default_factory=dict)
    pcies: list[PCIe] = field(default_factory=list)
    secondary_well_planned: bool = False
    honor_gpu_partition: bool = False
    gpu_partitions: Any = None
    """The GPU partition indexer of the Device's table (:mod:`.gputopology`), or ``None``."""
    gpu_topology: Any = None
    """The GPU topology tree (:mod:`.gputopology`), or ``None`` when a GPU lacks topology."""
    lock: threading.RLock = field(default_factory=threading.RLock)
    memo: dict[Any, tuple[Any, Any]] = field(default_factory=dict)
    """Filter verdicts and scores on these devices by pod shape (the plugin's), with the node object they
    were worked out with; emptied on every change of the devices or of what pods hold."""
    spec_memo: Any = field(default=None, repr=False)
    """What the Device object says, as :mod:`.alike` compares nodes, with the objects it was read from."""
    version: int = field(default_factory=lambda: next(_VERSIONS))
    """Changes with every change of the devices or of what pods hold; unique across NodeDevices (a node
    deleted and added again does not reuse one), so an answer kept beside it is current while it is."""

    def changed(self) -> None:
        self.memo.clear()
        self.version = next(_VERSIONS)

    def remember(self, key: Any, node: Any, value: Any) -> None:
        if len(self.memo) >= MEMO_SIZE:
            self.memo.clear()
        self.memo[key] = (node, value)

    # ---- what the Device object says --------------------------------------------------------------

    def reset_total(self, total: ByType) -> None:
        """New device resources: a type that disappeared keeps an empty entry; free is recomputed."""
        self.changed()
        for t in self.total:
            total.setdefault(t, {})
        self.total = total
        for t in total:
            self.reset_free(t)

    def reset_free(self, t: str) -> None:
        self.changed()
        total = self.total.setdefault(t, {})
        free = rs.copy_devices(total)
        for minor, used in self.used.get(t, {}).items():
            # As Koordinator does, a device in use that the Device no longer lists stays, with nothing.
            free[minor] = rs.subtract_non_negative(total.setdefault(minor, {}), used)
        self.free[t] = free

    # ---- what pods hold ---------------------------------------------------------------------------

    def update_used(
        self, allocations: Mapping[str, Sequence[DeviceAllocation]], pod_key: str, add: bool
    ) -> None:
        """Count (``add``) or release a pod's allocation. A pod already counted is not counted twice
        (Reserve counts it before the informer sees it bound), one not counted is not released."""
        for t, allocs in allocations.items():
            pods = self.allocate_set.setdefault(t, {})
            if (pod_key in pods) == add:
                continue
            used = self.used.setdefault(t, {})
            for a in allocs:
                if add:
                    used[a.minor] = rs.add(used.get(a.minor, {}), a.resources)
                else:
                    left = rs.subtract_non_negative(used.get(a.minor, {}), a.resources)
                    if rs.is_zero(left):
                        used.pop(a.minor, None)
                    else:
                        used[a.minor] = left
            if not add and not used:
                del self.used[t]
            self._update_vfs(t, allocs, add)
            self.reset_free(t)
            if add:
                pods[pod_key] = {a.minor: dict(a.resources) for a in allocs}
                self.records.setdefault(pod_key, {})[t] = list(allocs)
            else:
                del pods[pod_key]
                kept = self.records.get(pod_key, {})
                kept.pop(t, None)
                if not kept:
                    self.records.pop(pod_key, None)

    def release(self, pod_key: str) -> bool:
        """Release whatever is counted for the pod; whether anything was."""
        counted = self.records.get(pod_key)
        if not counted:
            return False
        self.update_used(dict(counted), pod_key, False)
        return True

    def _update_vfs(self, t: str, allocs: Sequence[DeviceAllocation], add: bool) -> None:
        taken = self.vfs.setdefault(t, {})
        for a in allocs:
            if not a.vfs:
                continue
            bus_ids = {v.bus_id for v in a.vfs}
            if add:
                taken.setdefault(a.minor, set()).update(bus_ids)
            else:
                left = taken.get(a.minor, set()) - bus_ids
                if left:
                    taken[a.minor] = left
                else:
                    taken.pop(a.minor, None)
        if not taken:
            del self.vfs[t]

    def held_by(self, pod_key: str) -> ByType:
        """What the pod holds on this node, by device type (Koordinator's ``getUsed``)."""
        return {
            t: rs.copy_devices(pods[pod_key]) for t, pods in self.allocate_set.items() if pods.get(pod_key)
        }

    # ---- views for one allocation -----------------------------------------------------------------

    def free_with_preemptible(self, t: str, preemptible: Devices | None, required: Devices | None) -> Devices:
        """``calcFreeWithPreemptible``: free plus what may be preempted, capped at ``required``."""
        free = self.free.get(t, {})
        merged: Devices = {}
        for minor, res in (preemptible or {}).items():
            used = rs.subtract_non_negative(self.used.get(t, {}).get(minor, {}), res)
            remaining = rs.subtract_non_negative(self.total.get(t, {}).get(minor, {}), used)
            if not rs.is_zero(remaining):
                merged[minor] = remaining
        if merged:
            for minor, res in free.items():
                merged.setdefault(minor, dict(res))
            free = merged
        if required:
            return {m: rs.minimum(res, required[m]) for m, res in free.items() if m in required}
        return free

    def filter(
        self,
        devices: Mapping[str, Sequence[int]],
        hints: Mapping[str, DeviceHint],
        required: Mapping[str, Devices] | None,
        preemptible: Mapping[str, Devices] | None,
    ) -> NodeDevice:
        """A view with only ``devices`` (type -> minors) and the free resources computed as above."""
        total: ByType = {}
        used: ByType = {}
        for t, minors in devices.items():
            free = self.free_with_preemptible(t, (preemptible or {}).get(t), (required or {}).get(t))
            if rs.devices_zero(free):
                continue
            keep = set(minors)
            hint = hints.get(t)
            if hint is not None and hint.exclusive_policy == PCIE_LEVEL_EXCLUSIVE:
                keep &= self._idle_pcie_minors(free, t)
            original = self.total.get(t, {})
            total[t] = {m: dict(original.get(m, {})) for m in free if m in keep}
            used[t] = {}
            for m in free:
                if m in keep:
                    taken = rs.subtract_non_negative(original.get(m, {}), free[m])
                    if not rs.is_zero(taken):
                        used[t][m] = taken
        view = NodeDevice(
            used=used,
            vfs=self.vfs,
            infos=self.infos,
            pcies=self.pcies,
            secondary_well_planned=self.secondary_well_planned,
            honor_gpu_partition=self.honor_gpu_partition,
            gpu_partitions=self.gpu_partitions,
            gpu_topology=self.gpu_topology,
        )
        view.reset_total(total)
        return view

    def _idle_pcie_minors(self, free: Devices, t: str) -> set[int]:
        """``filterFreeDevicesByPCIe``: the devices behind PCIe switches none of whose devices is in use."""
        out: set[int] = set()
        total = self.total.get(t, {})
        for pcie in self.pcies:
            minors = pcie.devices.get(t, ())
            if all(rs.equals(total.get(m, {}), free.get(m, {})) for m in minors):
                out.update(minors)
        return out

    def summary(self) -> dict[str, Any]:
        """What ``/debug/nodes/<node>`` shows (Koordinator's ``NodeDeviceSummary``, per device)."""
        with self.lock:
            return {
                "deviceTotal": _by_type(self.total),
                "deviceFree": _by_type(self.free),
                "deviceUsed": _by_type(self.used),
                "allocateSet": {
                    t: {k: _devices(d) for k, d in pods.items()} for t, pods in self.allocate_set.items()
                },
            }


def _devices(d: Mapping[int, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    return {str(m): dict(r) for m, r in sorted(d.items())}


def _by_type(m: Mapping[str, Mapping[int, Mapping[str, int]]]) -> dict[str, dict[str, dict[str, int]]]:
    return {t: _devices(d) for t, d in m.items()}
