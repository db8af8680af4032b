"""The allocation of a pod's devices on one node (Koordinator's ``AutopilotAllocator``,
``device_allocator.go``, ``devicehandler_*.go``). Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koord.scheduler.framework import Status
from koord.scheduler.plugins.deviceshare import gpuallocator
from koord.scheduler.plugins.deviceshare import resources as rs
from koord.scheduler.plugins.deviceshare.devicepick import (
    AllocationFailed,
    Request,
    allocate_default,
    insufficient,
)
from koord.scheduler.plugins.deviceshare.nodedevice import NodeDevice
from koord.scheduler.plugins.deviceshare.resources import Devices, ResourceList
from koord.scheduler.plugins.deviceshare.scoring import Scorer
from koord.scheduler.plugins.deviceshare.state import PodDeviceState
from koordshared.apis.extension.deviceshare import (
    APPLY_FOR_ALL,
    DEVICE_LEVEL_EXCLUSIVE,
    PCIE_LEVEL_EXCLUSIVE,
    REQUESTS_AS_COUNT,
    SAME_PCIE_SCOPE,
    DeviceAllocation,
    DeviceAllocations,
    DeviceHint,
)
from koordshared.apis.scheduling import device as dv


def _default_shape(
    t: str, request: ResourceList, nd: NodeDevice, hint: DeviceHint | None
) -> tuple[ResourceList, int]:
    """``DefaultDeviceHandler.CalcDesiredRequestsAndCount`` (RDMA, FPGA)."""
    if not nd.total.get(t):
        raise AllocationFailed(Status.unresolvable(insufficient(t)))
    name = dv.RESOURCE_RDMA if t == dv.RDMA else dv.RESOURCE_FPGA
    value = request.get(name, 0)
    if value > 100 and value % 100 == 0:
        return {name: value // (value // 100)}, value // 100
    if hint is None:
        return request, 1
    if hint.allocate_strategy == APPLY_FOR_ALL:
        infos = nd.infos.get(t, [])
        count = (
            len(nd.total[t]) if hint.selector is None else sum(hint.selector.matches(d.labels) for d in infos)
        )
        if count == 0:
            raise AllocationFailed(Status.unresolvable(insufficient(t)))
        return request, count
    if hint.allocate_strategy == REQUESTS_AS_COUNT:
        return {name: 100 if hint.exclusive_policy == DEVICE_LEVEL_EXCLUSIVE else 1}, value
    return request, 1


class Allocator:
    """One pod on one node (``AutopilotAllocator``); ``numa_nodes``: the NUMA nodes the devices must be on
    (``None``: any)."""

    def __init__(
        self,
        state: PodDeviceState,
        nd: NodeDevice,
        node: Mapping[str, Any] | None,
        scorer: Scorer | None,
        *,
        reserving: bool = False,
        numa_nodes: frozenset[int] | None = None,
    ) -> None:
        self.state, self.nd, self.node, self.scorer = state, nd, node, scorer
        self.reserving = reserving
        self.numa_nodes = numa_nodes
        self._prepared: tuple[dict[str, ResourceList], dict[str, int]] | None = None

    def reserving_matters(self) -> bool:
        """Whether Reserve asks for more than Filter here: the secondary devices a well-planned node pairs
        with the GPUs."""
        st = self.state
        return bool(st.primary_type and st.fits_secondary_well_planned and self.nd.secondary_well_planned)

    def prepare(self) -> tuple[dict[str, ResourceList], dict[str, int]]:
        """Per-device requests and counts by type (``Prepare``); :class:`AllocationFailed` if impossible."""
        if self._prepared is not None:
            return self._prepared
        st, nd = self.state, self.nd
        per: dict[str, ResourceList] = {}
        counts: dict[str, int] = {}
        for t, request in st.requests.items():
            if rs.is_zero(request) or t not in dv.DEVICE_TYPES:
                continue
            # A well-planned node pairs secondary devices with the GPUs: they are picked at Reserve only.
            if t != st.primary_type and self.reserving_matters() and not self.reserving:
                continue
            if t == dv.GPU:
                if not nd.total.get(dv.GPU):
                    raise AllocationFailed(Status.unresolvable(insufficient(dv.GPU)))
                assert st.gpu is not None
                per[t], counts[t] = st.gpu.per_gpu, st.gpu.count
            else:
                per[t], counts[t] = _default_shape(t, request, nd, st.hints.get(t))
        for t in per:
            hint = st.hints.get(t)
            if hint is not None and hint.vf_selector is not None and not _has_vfs(nd, t):
                raise AllocationFailed(Status.unresolvable(f"Insufficient {t} VirtualFunctions"))
        self._prepared = per, counts
        return self._prepared

    def _view(
        self, required: Mapping[str, Devices] | None, preemptible: Mapping[str, Devices] | None
    ) -> NodeDevice:
        """``filterNodeDevice``."""
        per, _ = self.prepare()
        st = self.state
        if (
            not required
            and self.numa_nodes is None
            and not st.has_selectors
            and self._plain(per, preemptible)
        ):
            return self.nd
        devices: dict[str, list[int]] = {}
        for t in per:
            hint = st.hints.get(t)
            selector = hint.selector if hint is not None else None
            minors = set()
            for d in self.nd.infos.get(t, []):
                if self.numa_nodes is not None:
                    topo = d.topology
                    if topo is None or (topo.node_id != -1 and topo.node_id not in self.numa_nodes):
                        continue
                if selector is None or selector.matches(d.labels):
                    minors.add(d.minor)
            if minors:
                devices[t] = sorted(minors)
        return self.nd.filter(devices, st.hints, required, preemptible)

    def _plain(self, per: Mapping[str, ResourceList], preemptible: Mapping[str, Devices] | None) -> bool:
        """Whether the view would be the node's devices as they are (Koordinator always builds it, with
        the same outcome): nothing to count as free beyond them, no PCIe-level exclusivity, and each type
        asked for listed by the Device with something free (a view leaves a type without free out)."""
        if preemptible and any(preemptible.values()):
            return False
        for t in per:
            hint = self.state.hints.get(t)
            if hint is not None and hint.exclusive_policy == PCIE_LEVEL_EXCLUSIVE:
                return False
            if not self.nd.infos.get(t) or rs.devices_zero(self.nd.free.get(t, {})):
                return False
        return True

    def allocate(
        self,
        required: Mapping[str, set[int]] | None = None,
        preferred: Mapping[str, set[int]] | None = None,
        required_resources: Mapping[str, Devices] | None = None,
        preemptible: Mapping[str, Devices] | None = None,
    ) -> DeviceAllocations:
        """``Allocate``; :class:`AllocationFailed` when the node cannot take the pod."""
        per, counts = self.prepare()
        view = self._view(required_resources, preemptible)
        req = Request(
            self.state, self.node, self.nd, per, counts, self.scorer, required or {}, preferred or {}
        )
        result: DeviceAllocations = {}
        if len(per) > 1:
            result = self._joint(req, view)
        for t in per:
            if t not in result:
                got = allocate_type(req, view, t, per[t], counts[t], ())
                if got:
                    result[t] = got
        if not result:
            raise AllocationFailed(Status.unschedulable(*(insufficient(t) for t in per)))
        return result

    def _joint(self, req: Request, view: NodeDevice) -> DeviceAllocations:
        joint = self.state.joint
        if joint is None or not joint.device_types:
            return {}
        primary, *secondary = joint.device_types
        got = allocate_type(
            req, view, primary, req.per_device.get(primary, {}), req.counts.get(primary, 0), ()
        )
        if not got:
            raise AllocationFailed(Status.unschedulable("node(s) Insufficient primary device"))
        result: DeviceAllocations = {primary: got}
        pcies = _pcies_of(view, primary, got)
        for t in secondary:
            count = req.counts.get(t, 0)
            if joint.required_scope == SAME_PCIE_SCOPE and count < len(pcies):
                count = len(pcies)
            more = allocate_type(req, view, t, req.per_device.get(t, {}), count, tuple(sorted(pcies)))
            if more:
                result[t] = more
        if joint.required_scope == SAME_PCIE_SCOPE:
            for t in secondary:
                if _pcies_of(view, t, result.get(t, [])) != pcies:
                    raise AllocationFailed(
                        Status.unschedulable("node(s) Device Joint-Allocate rules violation")
                    )
        return result

    def score(self, required: Mapping[str, Devices] | None, preemptible: Mapping[str, Devices] | None) -> int:
        """The node's score for the pod: each type's devices scored as one (``score``)."""
        per, _ = self.prepare()
        view = self._view(required, preemptible)
        total = 0
        assert self.scorer is not None
        for t, request in per.items():
            if rs.is_zero(request):
                continue
            devices = view.total.get(t, {})
            if devices:
                total += self.scorer.score_node(request, devices, view.free.get(t, {}))
        return total


def _has_vfs(nd: NodeDevice, t: str) -> bool:
    return any(d.vf_groups for d in nd.infos.get(t, []))


def _pcies_of(nd: NodeDevice, t: str, allocs: Sequence[DeviceAllocation]) -> set[str]:
    minors = {a.minor for a in allocs}
    return {d.topology.pcie_id for d in nd.infos.get(t, []) if d.minor in minors and d.topology is not None}


def allocate_type(
    req: Request, view: NodeDevice, t: str, per_device: ResourceList, count: int, pcies: tuple[str, ...]
) -> list[DeviceAllocation]:
    """``allocateDevices``: ``count`` devices of type ``t`` (at least 1; as many as the preferred PCIe
    switches when that is more); an empty list when the type has nothing to allocate."""
    most = max(count, len(pcies))
    count = max(count, 1)
    most = max(most, count)
    if t == dv.GPU:
        return gpuallocator.allocate(req, view, count, most)
    return allocate_default(req, view, t, per_device, count, most, pcies)


def fill_gpu_memory(allocations: DeviceAllocations, nd: NodeDevice) -> DeviceAllocations:
    """``fillGPUTotalMem``: each GPU allocation with both its memory and its memory ratio, one worked out
    from the other and the GPU's memory; ``ValueError`` for a GPU that is gone or unhealthy."""
    gpus = allocations.get(dv.GPU)
    totals = nd.total.get(dv.GPU)
    if not gpus or totals is None:
        return allocations
    out = []
    for a in gpus:
        total = totals.get(a.minor)
        if rs.is_zero(total):
            raise ValueError(f"no healthy gpu device with minor {a.minor} of allocation")
        assert total is not None
        res = dict(a.resources)
        memory = total.get(dv.RESOURCE_GPU_MEMORY, 0)
        if dv.RESOURCE_GPU_MEMORY in res and dv.RESOURCE_GPU_MEMORY_RATIO not in res:
            res[dv.RESOURCE_GPU_MEMORY_RATIO] = (
                int(res[dv.RESOURCE_GPU_MEMORY] / memory * 100) if memory else 0
            )
        elif dv.RESOURCE_GPU_MEMORY not in res:
            res[dv.RESOURCE_GPU_MEMORY] = res.get(dv.RESOURCE_GPU_MEMORY_RATIO, 0) * memory // 100
        out.append(DeviceAllocation(a.minor, res, a.id, a.vfs, a.template))
    return {**allocations, dv.GPU: out}


def filled(allocations: DeviceAllocations, nd: NodeDevice) -> DeviceAllocations:
    """:func:`fill_gpu_memory`, a failure as an error status."""
    try:
        return fill_gpu_memory(allocations, nd)
    except ValueError as err:
        raise AllocationFailed(Status.error(f"fillGPUTotalMem failed: {err}")) from err
