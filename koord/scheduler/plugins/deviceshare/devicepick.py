"""Picking devices of one type from a node's view (Koordinator's ``defaultAllocateDevices``, with the request
context every allocator shares): the best-scored devices that fit, preferred minors first, else the devices
of the preferred PCIe switches in turn, then by score and minor; a virtual function on each device when the
hint asks for one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord.scheduler.framework import Status
from koord.scheduler.plugins.deviceshare import resources as rs
from koord.scheduler.plugins.deviceshare.nodedevice import NodeDevice
from koord.scheduler.plugins.deviceshare.resources import ResourceList
from koord.scheduler.plugins.deviceshare.scoring import Scorer
from koord.scheduler.plugins.deviceshare.state import PodDeviceState
from koordshared.apis.extension.deviceshare import DeviceAllocation, DeviceHint
from koordshared.apis.scheduling import device as dv


class AllocationFailed(Exception):
    """No allocation on this node: ``status`` says why (Koordinator's status)."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


def insufficient(device_type: str) -> str:
    return f"Insufficient {device_type} devices"


@dataclass(frozen=True, slots=True)
class Request:
    """What the allocation of one pod on one node works from (Koordinator's ``requestContext``)."""

    state: PodDeviceState
    node: Mapping[str, Any] | None
    original: NodeDevice
    per_device: Mapping[str, ResourceList]
    counts: Mapping[str, int]
    scorer: Scorer | None
    required: Mapping[str, set[int]] = field(default_factory=dict)
    preferred: Mapping[str, set[int]] = field(default_factory=dict)


def allocate_default(
    req: Request,
    view: NodeDevice,
    t: str,
    per_device: ResourceList,
    count: int,
    most: int,
    pcies: tuple[str, ...],
) -> list[DeviceAllocation]:
    """``defaultAllocateDevices``; :class:`AllocationFailed` with fewer than ``count`` devices."""
    free = view.free.get(t, {})
    total = view.total.get(t, {})
    required = req.required.get(t, set())
    hint = req.state.hints.get(t)
    infos = {d.minor: d for d in view.infos.get(t, [])}
    scored = [
        (m, res, req.scorer.score_device(per_device, total.get(m, {}), res) if req.scorer else 0)
        for m, res in free.items()
    ]
    preferred = req.preferred.get(t, set())
    order = _by_minor(scored, preferred) if preferred else _by_pcie(scored, set(pcies), infos)
    out: list[DeviceAllocation] = []
    for minor, res, _ in order:
        if required and minor not in required:
            continue
        if rs.is_zero(res) or not rs.fits(per_device, res):
            continue  # an unhealthy device has nothing
        vfs: tuple[dv.VirtualFunction, ...] = ()
        if hint is not None and hint.vf_selector is not None:
            vf = _free_vf(view, infos.get(minor), t, hint, req.state.designated_vfs.get(t, {}).get(minor))
            if vf is None:
                continue
            vfs = (vf,)
        out.append(DeviceAllocation(minor, dict(per_device), vfs=vfs))
        if len(out) == most:
            break
    if len(out) < count:
        raise AllocationFailed(Status.unschedulable(insufficient(t)))
    return out


def _free_vf(
    view: NodeDevice, info: dv.DeviceInfo | None, t: str, hint: DeviceHint, designated: set[str] | None
) -> dv.VirtualFunction | None:
    """``allocateVF``: the free VF with the lowest bus id in a group the VF selector matches."""
    if info is None:
        return None
    taken = view.vfs.get(t, {}).get(info.minor, set())
    assert hint.vf_selector is not None
    left = [
        vf
        for g in info.vf_groups
        if hint.vf_selector.matches(g.labels)
        for vf in g.vfs
        if vf.bus_id not in taken and (designated is None or vf.bus_id in designated)
    ]
    return min(left, key=lambda vf: vf.bus_id) if left else None


Scored = tuple[int, ResourceList, int]


def _by_minor(scored: list[Scored], preferred: set[int]) -> list[Scored]:
    """``sortDeviceResourcesByMinor``: preferred minors first, then the higher score, then the lower minor."""
    return sorted(scored, key=lambda s: (s[0] not in preferred, -s[2], s[0]))


def _by_pcie(scored: list[Scored], pcies: set[str], infos: Mapping[int, dv.DeviceInfo]) -> list[Scored]:
    """``sortDeviceResourcesByPreferredPCIe``: the devices of preferred PCIe switches round robin (the best
    of each switch, then the second best...), then the others; each by score, then minor."""
    ordered = _by_minor(scored, set())
    groups: dict[str, list[Scored]] = {}
    others: list[Scored] = []
    for s in ordered:
        d = infos.get(s[0])
        if d is not None and d.topology is not None and d.topology.pcie_id in pcies:
            groups.setdefault(d.topology.pcie_id, []).append(s)
        else:
            others.append(s)
    out: list[Scored] = []
    for i in range(max((len(g) for g in groups.values()), default=0)):
        out.extend(_by_minor([g[i] for g in groups.values() if i < len(g)], set()))
    return out + others
