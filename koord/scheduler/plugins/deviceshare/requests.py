"""What a pod asks of a node's devices (Koordinator's ``GetPodDeviceRequests``, ``ValidateDeviceRequest``,
``ConvertDeviceRequest`` and ``calcDesiredRequestsAndCountForGPU``).

A pod's device resources are grouped by device type and checked as a combination: GPUs may be asked for
whole (``nvidia.com/gpu``, ``amd.com/gpu``, ``dcu.com/gpu``: N cards; ``koordinator.sh/gpu``: percent of a
card, 100 per card) or in parts (``koordinator.sh/gpu-core`` with ``gpu-memory`` or ``gpu-memory-ratio``,
``gpu.shared`` for a count of shared cards); ``koordinator.sh/rdma`` and ``koordinator.sh/fpga`` are percent
of a device. A percentage above 100 must be a multiple of 100. Each combination converts to Koordinator's
canonical form: whole GPUs become ``gpu-core`` and ``gpu-memory-ratio`` of 100 per card.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from koord.scheduler.plugins.deviceshare.resources import ResourceList
from koordshared.apis.scheduling import device as dv

NVIDIA_GPU, AMD_GPU, HYGON_DCU, KOORD_GPU, GPU_SHARED, GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO = (
    1 << i for i in range(8)
)
NPU_CORE, NPU_CPU, NPU_DVPP, FPGA, RDMA = (1 << i for i in range(8, 13))

DEVICE_RESOURCE_NAMES: Mapping[str, tuple[str, ...]] = {
    dv.GPU: (
        dv.RESOURCE_NVIDIA_GPU,
        dv.RESOURCE_AMD_GPU,
        dv.RESOURCE_HYGON_DCU,
        dv.RESOURCE_GPU,
        dv.RESOURCE_GPU_SHARED,
        dv.RESOURCE_GPU_CORE,
        dv.RESOURCE_GPU_MEMORY,
        dv.RESOURCE_GPU_MEMORY_RATIO,
        dv.RESOURCE_HUAWEI_NPU_CORE,
        dv.RESOURCE_HUAWEI_NPU_CPU,
        dv.RESOURCE_HUAWEI_NPU_DVPP,
    ),
    dv.RDMA: (dv.RESOURCE_RDMA,),
    dv.FPGA: (dv.RESOURCE_FPGA,),
}
_FLAGS = {
    dv.RESOURCE_NVIDIA_GPU: NVIDIA_GPU,
    dv.RESOURCE_AMD_GPU: AMD_GPU,
    dv.RESOURCE_HYGON_DCU: HYGON_DCU,
    dv.RESOURCE_GPU: KOORD_GPU,
    dv.RESOURCE_GPU_CORE: GPU_CORE,
    dv.RESOURCE_GPU_MEMORY: GPU_MEMORY,
    dv.RESOURCE_GPU_MEMORY_RATIO: GPU_MEMORY_RATIO,
    dv.RESOURCE_GPU_SHARED: GPU_SHARED,
    dv.RESOURCE_HUAWEI_NPU_CORE: NPU_CORE,
    dv.RESOURCE_HUAWEI_NPU_CPU: NPU_CPU,
    dv.RESOURCE_HUAWEI_NPU_DVPP: NPU_DVPP,
    dv.RESOURCE_FPGA: FPGA,
    dv.RESOURCE_RDMA: RDMA,
}
_PERCENT_NAMES = (dv.RESOURCE_GPU, dv.RESOURCE_FPGA, dv.RESOURCE_RDMA)


class DeviceRequestError(ValueError):
    """The pod's device requests are not a combination Koordinator accepts (Koordinator's message)."""


def percentage_ok(value: int) -> bool:
    """``ValidatePercentageResource``: up to 100, or a multiple of 100."""
    return value <= 100 or value % 100 == 0


def _shared_ok(req: Mapping[str, int]) -> bool:
    shared = req.get(dv.RESOURCE_GPU_SHARED)
    if shared is None or shared == 0:
        return False  # Koordinator divides by it below; a zero count was removed before, so absent here
    for name in (dv.RESOURCE_GPU_CORE, dv.RESOURCE_GPU_MEMORY_RATIO):
        if name in req and (req[name] % shared != 0 or req[name] // shared > 100):
            return False
    return True


def _npu_shared_ok(req: Mapping[str, int]) -> bool:
    shared = req.get(dv.RESOURCE_GPU_SHARED)
    if shared is None or shared > 1:  # several shared NPUs are not supported on the node side
        return False
    return req.get(dv.RESOURCE_HUAWEI_NPU_DVPP, 0) <= 100


def _percentage(req: Mapping[str, int]) -> bool:
    return all(
        percentage_ok(req[n]) for n in (dv.RESOURCE_GPU_CORE, dv.RESOURCE_GPU_MEMORY_RATIO) if n in req
    )


def _any(req: Mapping[str, int]) -> bool:
    return True


VALID_COMBINATIONS: Mapping[int, Callable[[Mapping[str, int]], bool]] = {
    NVIDIA_GPU: _any,
    AMD_GPU: _any,
    HYGON_DCU: _any,
    KOORD_GPU: _any,
    GPU_MEMORY: _percentage,
    GPU_MEMORY_RATIO: _percentage,
    GPU_CORE | GPU_MEMORY: _percentage,
    GPU_CORE | GPU_MEMORY_RATIO: _percentage,
    NPU_CORE | GPU_MEMORY_RATIO: _percentage,
    GPU_SHARED | GPU_MEMORY: _shared_ok,
    GPU_SHARED | GPU_MEMORY_RATIO: _shared_ok,
    GPU_SHARED | GPU_CORE | GPU_MEMORY: _shared_ok,
    GPU_SHARED | GPU_CORE | GPU_MEMORY_RATIO: _shared_ok,
    GPU_SHARED | NPU_CORE | NPU_CPU | GPU_MEMORY: _npu_shared_ok,
    GPU_SHARED | NPU_CORE | NPU_CPU | NPU_DVPP | GPU_MEMORY: _npu_shared_ok,
    FPGA: _any,
    RDMA: _any,
}


def _whole_cards(name: str) -> Callable[[Mapping[str, int]], ResourceList]:
    return lambda req: {dv.RESOURCE_GPU_CORE: req[name] * 100, dv.RESOURCE_GPU_MEMORY_RATIO: req[name] * 100}


def _keep(*names: str) -> Callable[[Mapping[str, int]], ResourceList]:
    return lambda req: {n: req.get(n, 0) for n in names}


CONVERSIONS: Mapping[int, Callable[[Mapping[str, int]], ResourceList]] = {
    NVIDIA_GPU: _whole_cards(dv.RESOURCE_NVIDIA_GPU),
    AMD_GPU: _whole_cards(dv.RESOURCE_AMD_GPU),
    HYGON_DCU: _whole_cards(dv.RESOURCE_HYGON_DCU),
    KOORD_GPU: lambda req: {
        dv.RESOURCE_GPU_CORE: req[dv.RESOURCE_GPU],
        dv.RESOURCE_GPU_MEMORY_RATIO: req[dv.RESOURCE_GPU],
    },
    FPGA: _keep(dv.RESOURCE_FPGA),
    RDMA: _keep(dv.RESOURCE_RDMA),
}
"""The combinations that change form; the others keep the names they combine (below)."""


def _names_of(combination: int) -> tuple[str, ...]:
    return tuple(n for n, f in _FLAGS.items() if combination & f)


def validate(request: Mapping[str, int]) -> int:
    """The combination of one device type's requests; :class:`DeviceRequestError` when invalid."""
    combination = 0
    for name, value in request.items():
        combination |= _FLAGS.get(name, 0)
        if name in _PERCENT_NAMES and not percentage_ok(value):
            raise DeviceRequestError(f"invalid resource unit {name}: {value}")
    valid = VALID_COMBINATIONS.get(combination)
    if valid is None or not valid(request):
        raise DeviceRequestError(f"invalid resource device requests: [{' '.join(sorted(request))}]")
    return combination


def convert(request: Mapping[str, int], combination: int) -> ResourceList:
    """The canonical form of a valid request."""
    mapper = CONVERSIONS.get(combination)
    if mapper is not None:
        return mapper(request)
    return _keep(*_names_of(combination))(request)


def pod_device_requests(requests: Mapping[str, int]) -> dict[str, ResourceList]:
    """Device type -> the canonical request (only types the pod asks for, above zero)."""
    out: dict[str, ResourceList] = {}
    for device_type, names in DEVICE_RESOURCE_NAMES.items():
        request = {n: requests[n] for n in names if requests.get(n, 0) != 0}
        if request:
            out[device_type] = convert(request, validate(request))
    return out


@dataclass(frozen=True, slots=True)
class GPUShape:
    """``calcDesiredRequestsAndCountForGPU``: how many GPUs, what of each, and whether they are shared."""

    count: int
    per_gpu: ResourceList
    shared: bool


def gpu_shape(request: Mapping[str, int]) -> GPUShape:
    count = 1
    shared_count = request.get(dv.RESOURCE_GPU_SHARED, 0)
    ratio = request.get(dv.RESOURCE_GPU_MEMORY_RATIO)
    if shared_count > 0:
        count = shared_count
    elif ratio is not None and ratio > 100 and ratio % 100 == 0:
        count = ratio // 100
    per: ResourceList = {}
    for name in (
        dv.RESOURCE_GPU_CORE,
        dv.RESOURCE_HUAWEI_NPU_CORE,
        dv.RESOURCE_HUAWEI_NPU_CPU,
        dv.RESOURCE_HUAWEI_NPU_DVPP,
    ):
        if name in request:
            per[name] = request[name] // count
    shared = False
    if ratio is not None:
        per[dv.RESOURCE_GPU_MEMORY_RATIO] = ratio // count
        shared = per[dv.RESOURCE_GPU_MEMORY_RATIO] < 100
    elif dv.RESOURCE_GPU_MEMORY in request:
        shared = True
        per[dv.RESOURCE_GPU_MEMORY] = request[dv.RESOURCE_GPU_MEMORY] // count
    return GPUShape(count, per, shared)
