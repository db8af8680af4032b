"""What DeviceShare works out about the pod at PreFilter and keeps in the cycle state (Koordinator's
``preFilterState`` and ``preparePod``): its device requests by type, its hints (selectors, strategies,
joint allocation, GPU partition spec), the GPU requirements, the allocation it already carries (honoured only
when a scheduling hint names DeviceShare), the devices preemption would free per node, and the allocation
chosen (set by Filter's trial on a designated allocation, by Reserve, cleared by Unreserve)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from koord.scheduler.plugins.deviceshare.requests import DeviceRequestError, gpu_shape, pod_device_requests
from koord.scheduler.plugins.deviceshare.resources import ByType, ResourceList, copy_by_type
from koordshared.apis.core.pod import annotations_of
from koordshared.apis.extension.deviceshare import (
    APPLY_FOR_ALL,
    PARTITION_RESTRICTED,
    TOPOLOGY_SCOPE_LEVEL,
    DeviceAllocations,
    DeviceHint,
    DeviceJointAllocate,
    parse_allocate_hints,
    parse_device_allocations,
    parse_gpu_partition_spec,
    parse_joint_allocate,
)
from koordshared.apis.scheduling import device as dv
from koordshared.runtime.errors import InvalidValue

STATE_KEY = "DeviceShare"
ANNOTATION_RESERVATION_AFFINITY = "scheduling.koordinator.sh/reservation-affinity"
LABEL_PRE_ALLOCATION_REQUIRED = "scheduling.koordinator.sh/pre-allocation-required"
LABEL_RESERVATION_IGNORED = "scheduling.koordinator.sh/reservation-ignored"
NO_MATCHED_TEMPLATE = "no matched GPU shared resource template"


@dataclass(frozen=True, slots=True)
class GPURequirements:
    count: int
    per_gpu: ResourceList
    shared: bool
    honor_partition: bool = False
    restricted_partition: bool = False
    ring_bus_bandwidth: Fraction | None = None
    required_scope: str = ""
    required_scope_level: int = 0
    enforce_template: bool = False
    templates: Mapping[str, Mapping[str, ResourceList]] = field(default_factory=dict)
    """``vendor-model`` -> template name -> resources: the templates the per-GPU request matches."""


@dataclass(eq=False)
class PodDeviceState:
    skip: bool = True
    requests: dict[str, ResourceList] = field(default_factory=dict)
    hints: Mapping[str, DeviceHint] = field(default_factory=dict)
    has_selectors: bool = False
    joint: DeviceJointAllocate | None = None
    primary_type: str = ""
    fits_secondary_well_planned: bool = False
    gpu: GPURequirements | None = None
    reservation_required: bool = False
    reservation_ignored: bool = False
    """Labelled ``reservation-ignored``: the node's free devices and every reservation's unallocated part."""
    isolation_provider: str = ""
    """The GPU isolation provider the pod names (its label), or ``""``."""
    designated: DeviceAllocations | None = None
    designated_vfs: dict[str, dict[int, set[str]]] = field(default_factory=dict)
    result: DeviceAllocations | None = None
    preemptible: dict[str, ByType] = field(default_factory=dict)
    """Node -> what pods preemption's what-ifs removed there hold (PreFilter extensions)."""
    preemptible_in_reservations: dict[str, dict[str, ByType]] = field(default_factory=dict)
    """Node -> reservation uid -> the same, for pods allocated from a reservation."""
    signature: str = ""
    """The pod's shape as the allocation sees it (requests, hints, GPU requirements, the labels that
    matter): pods with equal signatures get equal Filter verdicts and scores on an unchanged node."""

    def clone(self) -> PodDeviceState:
        """A copy whose what-if bookkeeping can change without touching this one."""
        out = PodDeviceState(**{k: getattr(self, k) for k in self.__dataclass_fields__})
        out.preemptible = {n: copy_by_type(m) for n, m in self.preemptible.items()}
        out.preemptible_in_reservations = {
            n: {r: copy_by_type(m) for r, m in rs.items()}
            for n, rs in self.preemptible_in_reservations.items()
        }
        return out


class PodRejected(Exception):
    """The pod's device requests or annotations cannot be scheduled anywhere (unresolvable at PreFilter)."""


def designated_vfs(allocations: DeviceAllocations | None) -> dict[str, dict[int, set[str]]]:
    out: dict[str, dict[int, set[str]]] = {}
    for t, allocs in (allocations or {}).items():
        of_type = {a.minor: {v.bus_id for v in a.vfs} for a in allocs if a.vfs}
        if of_type:
            out[t] = of_type
    return out


def _reservation_required(pod: Mapping[str, Any]) -> bool:
    """Whether the pod may only use reserved resources: it has a reservation affinity or requires
    pre-allocation (Koordinator's ``GetRequiredReservationAffinity`` / ``IsPreAllocationRequired``)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if labels.get(LABEL_PRE_ALLOCATION_REQUIRED) == "true":
        return True
    text = annotations_of(pod).get(ANNOTATION_RESERVATION_AFFINITY)
    if text is None:
        return False
    try:
        doc = json.loads(str(text))
    except ValueError as err:
        raise PodRejected(f"invalid reservation affinity: {err}") from err
    return doc is not None


def _gpu_requirements(
    pod: Mapping[str, Any],
    request: ResourceList,
    hint: DeviceHint | None,
    templates: Mapping[str, Mapping[str, ResourceList]],
    matched: tuple[str, ...],
) -> GPURequirements:
    spec = parse_gpu_partition_spec(annotations_of(pod))
    shape = gpu_shape(request)
    scope = hint.required_topology_scope if hint is not None else ""
    enforce = shape.shared and any(n in shape.per_gpu for n in matched)
    found: dict[str, dict[str, ResourceList]] = {}
    if enforce:
        for key, of_model in templates.items():
            hits = {name: dict(t) for name, t in of_model.items() if dict(t) == shape.per_gpu}
            if hits:
                found[key] = hits
        if not found:
            raise PodRejected(NO_MATCHED_TEMPLATE)
    return GPURequirements(
        shape.count,
        shape.per_gpu,
        shape.shared,
        honor_partition=spec is not None,
        restricted_partition=spec is not None and spec.allocate_policy == PARTITION_RESTRICTED,
        ring_bus_bandwidth=spec.ring_bus_bandwidth if spec is not None else None,
        required_scope=scope,
        required_scope_level=TOPOLOGY_SCOPE_LEVEL.get(scope, 0),
        enforce_template=enforce,
        templates=found,
    )


def prepare_pod(
    pod: Mapping[str, Any],
    requests: Mapping[str, int],
    templates: Mapping[str, Mapping[str, ResourceList]],
    matched: tuple[str, ...],
) -> PodDeviceState:
    """``preparePod``; :class:`PodRejected` with Koordinator's reason when the pod cannot be scheduled."""
    try:
        device_requests = pod_device_requests(requests)
        annotations = annotations_of(pod)
        designated = parse_device_allocations(annotations)
        state = PodDeviceState(skip=not device_requests, requests=device_requests, designated=designated)
        state.designated_vfs = designated_vfs(designated)
        if state.skip:
            return state
        try:
            hints = parse_allocate_hints(annotations) or {}
        except InvalidValue as err:
            raise PodRejected(f"invalid DeviceAllocateHint annotation, err: {err.reason}") from err
        try:
            joint = parse_joint_allocate(annotations)
        except InvalidValue as err:
            raise PodRejected(f"invalid DeviceJointAllocate annotation, err: {err.reason}") from err
        if joint is not None:
            kept = tuple(
                t
                for t in joint.device_types
                if not (t in hints and hints[t].allocate_strategy == APPLY_FOR_ALL) and device_requests.get(t)
            )
            joint = DeviceJointAllocate(kept, joint.required_scope)
            state.primary_type = kept[0] if kept else ""
        state.hints, state.joint = hints, joint
        state.has_selectors = any(h.selector is not None for h in hints.values())
        if dv.GPU in device_requests:
            state.gpu = _gpu_requirements(pod, device_requests[dv.GPU], hints.get(dv.GPU), templates, matched)
        state.fits_secondary_well_planned = state.gpu is not None and not state.gpu.shared
        state.reservation_required = _reservation_required(pod)
        labels = dv.labels_of(pod)
        state.reservation_ignored = labels.get(LABEL_RESERVATION_IGNORED) == "true"
        state.isolation_provider = str(labels.get(dv.LABEL_GPU_ISOLATION_PROVIDER) or "")
        state.signature = repr(
            (
                sorted((t, sorted(r.items())) for t, r in device_requests.items()),
                sorted(hints.items()),
                state.joint,
                state.gpu,
                state.reservation_required,
                state.isolation_provider,
                state.reservation_ignored,
            )
        )
        return state
    except (DeviceRequestError, InvalidValue) as err:
        raise PodRejected(str(err)) from err
