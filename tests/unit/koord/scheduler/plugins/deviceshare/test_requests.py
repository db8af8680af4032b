"""DeviceShare's reading of what a pod asks for, against Koordinator's ``ValidateDeviceRequest``,
``ConvertDeviceRequest`` and ``calcDesiredRequestsAndCountForGPU`` cases; the device-allocated annotation
written byte for byte as Koordinator's scheduler writes it and read back; strict args."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koord.scheduler.plugins.deviceshare.args import DEFAULT_RESOURCES, LEAST, parse_args
from koord.scheduler.plugins.deviceshare.requests import DeviceRequestError, gpu_shape, pod_device_requests
from koordshared.apis.extension.deviceshare import (
    ANNOTATION_DEVICE_ALLOCATED,
    DeviceAllocation,
    format_device_allocations,
    parse_device_allocations,
)
from koordshared.apis.scheduling import device as dv
from koordshared.apis.scheduling.device import VirtualFunction
from koordshared.runtime.errors import InvalidArgs, InvalidValue

GI = 1024**3
CORE, RATIO, MEM, SHARED = (
    dv.RESOURCE_GPU_CORE,
    dv.RESOURCE_GPU_MEMORY_RATIO,
    dv.RESOURCE_GPU_MEMORY,
    dv.RESOURCE_GPU_SHARED,
)


@pytest.mark.parametrize(
    ("request_", "want"),
    [
        ({dv.RESOURCE_NVIDIA_GPU: 2}, {CORE: 200, RATIO: 200}),
        ({dv.RESOURCE_HYGON_DCU: 2}, {CORE: 200, RATIO: 200}),
        ({dv.RESOURCE_AMD_GPU: 1}, {CORE: 100, RATIO: 100}),
        ({dv.RESOURCE_GPU: 50}, {CORE: 50, RATIO: 50}),
        ({CORE: 50, RATIO: 50}, {CORE: 50, RATIO: 50}),
        ({CORE: 50, MEM: 32 * GI}, {CORE: 50, MEM: 32 * GI}),
        ({RATIO: 200}, {RATIO: 200}),
        ({MEM: 64 * GI}, {MEM: 64 * GI}),
        ({SHARED: 2, RATIO: 200}, {SHARED: 2, RATIO: 200}),
        ({dv.RESOURCE_HUAWEI_NPU_CORE: 20, RATIO: 100}, {dv.RESOURCE_HUAWEI_NPU_CORE: 20, RATIO: 100}),
    ],
)
def test_valid_gpu_requests_convert_to_koordinators_canonical_form(
    request_: dict[str, int], want: dict[str, int]
) -> None:
    assert pod_device_requests({"cpu": 1000, **request_}) == {dv.GPU: want}


def test_rdma_and_fpga_are_kept_and_other_resources_ignored() -> None:
    got = pod_device_requests({"cpu": 1000, "memory": GI, dv.RESOURCE_RDMA: 80, dv.RESOURCE_FPGA: 200})
    assert got == {dv.RDMA: {dv.RESOURCE_RDMA: 80}, dv.FPGA: {dv.RESOURCE_FPGA: 200}}
    assert pod_device_requests({"cpu": 1000, dv.RESOURCE_GPU_CORE: 0}) == {}  # zeros are removed first


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({CORE: 101}, "invalid resource device requests: [koordinator.sh/gpu-core]"),  # core alone
        (
            {dv.RESOURCE_NVIDIA_GPU: 2, dv.RESOURCE_GPU: 200, CORE: 200, MEM: 32 * GI, RATIO: 200},
            "invalid resource device requests",
        ),
        ({dv.RESOURCE_GPU: 101}, "invalid resource unit koordinator.sh/gpu: 101"),
        ({CORE: 100, RATIO: 101}, "invalid resource device requests"),
        ({RATIO: 101, SHARED: 1}, "invalid resource device requests"),
        ({CORE: 101, MEM: 64 * GI, SHARED: 2}, "invalid resource device requests"),  # 101 not a multiple of 2
        ({dv.RESOURCE_RDMA: 150}, "invalid resource unit koordinator.sh/rdma: 150"),
        ({SHARED: 2, dv.RESOURCE_HUAWEI_NPU_CORE: 10, dv.RESOURCE_HUAWEI_NPU_CPU: 3, MEM: GI}, "invalid"),
    ],
)
def test_invalid_requests_are_refused_with_koordinators_message(
    request_: dict[str, int], message: str
) -> None:
    with pytest.raises(DeviceRequestError, match=message.replace("[", r"\[").replace("]", r"\]")):
        pod_device_requests(request_)


@pytest.mark.parametrize(
    ("request_", "count", "per", "shared"),
    [
        ({CORE: 200, RATIO: 200}, 2, {CORE: 100, RATIO: 100}, False),
        ({CORE: 50, RATIO: 50}, 1, {CORE: 50, RATIO: 50}, True),
        ({CORE: 100, RATIO: 150}, 1, {CORE: 100, RATIO: 150}, False),  # 150 is not a multiple of 100
        ({CORE: 50, MEM: 8 * GI}, 1, {CORE: 50, MEM: 8 * GI}, True),
        ({SHARED: 2, CORE: 100, RATIO: 100}, 2, {CORE: 50, RATIO: 50}, True),
        ({SHARED: 2, MEM: 16 * GI}, 2, {MEM: 8 * GI}, True),
    ],
)
def test_gpu_shape(request_: dict[str, int], count: int, per: dict[str, int], shared: bool) -> None:
    shape = gpu_shape(request_)
    assert (shape.count, shape.per_gpu, shape.shared) == (count, per, shared)


def test_the_annotation_is_written_as_go_marshals_it_and_read_back() -> None:
    allocations = {
        dv.RDMA: [
            DeviceAllocation(1, {dv.RESOURCE_RDMA: 1}, "0000:81:00.0", (VirtualFunction(2, "0000:81:00.3"),))
        ],
        dv.GPU: [
            DeviceAllocation(0, {CORE: 100, RATIO: 100, MEM: 16 * GI}, "GPU-0"),
            DeviceAllocation(1, {CORE: 50, MEM: 8 * GI + 512, RATIO: 50}),
        ],
    }
    text = format_device_allocations(allocations)
    assert text == (
        '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"100","koordinator.sh/gpu-memory":"16Gi",'
        '"koordinator.sh/gpu-memory-ratio":"100"},"id":"GPU-0"},{"minor":1,"resources":{"koordinator.sh/gpu-core":'
        '"50","koordinator.sh/gpu-memory":"8589935104","koordinator.sh/gpu-memory-ratio":"50"}}],'
        '"rdma":[{"minor":1,"resources":{"koordinator.sh/rdma":"1"},"id":"0000:81:00.0",'
        '"extension":{"vfs":[{"minor":2,"busID":"0000:81:00.3"}]}}]}'
    )
    back = parse_device_allocations({ANNOTATION_DEVICE_ALLOCATED: text})
    assert back == {dv.GPU: allocations[dv.GPU], dv.RDMA: allocations[dv.RDMA]}
    assert parse_device_allocations({}) is None


@pytest.mark.parametrize(
    "bad",
    [
        "{not json",
        '["gpu"]',
        '{"gpu": {"minor": 0}}',
        '{"gpu": [{"minor": "0"}]}',
        '{"gpu": [{"resources": {"x": "lots"}}]}',
    ],
)
def test_an_unreadable_annotation_names_itself(bad: str) -> None:
    with pytest.raises(InvalidValue, match=ANNOTATION_DEVICE_ALLOCATED):
        parse_device_allocations({ANNOTATION_DEVICE_ALLOCATED: bad})


def test_args_defaults_and_validation() -> None:
    args = parse_args(None)
    assert (args.scoring_type, args.scoring_resources) == (LEAST, DEFAULT_RESOURCES)
    assert (
        args.templates.namespace == "koordinator-system"
        and args.templates.name == "gpu-shared-resource-templates"
    )
    got = parse_args(
        {
            "allocator": "autopilot",
            "scoringStrategy": {"type": "MostAllocated", "resources": [{"name": RATIO, "weight": 2}]},
            "gpuShareUnsupportedModels": [{"vendor": "huawei", "model": "Ascend-310P3-300I-DUO"}],
        }
    )
    assert got.scoring_type == "MostAllocated" and got.scoring_resources == ((RATIO, 2),)
    assert got.unsupported_models == {"huawei": frozenset({"Ascend-310P3-300I-DUO"})}


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}, "scoringStrategy.type"),
        ({"scoringStrategy": {}}, "scoringStrategy.type"),
        (
            {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": RATIO, "weight": 0}]}},
            r"resources\[0\].weight",
        ),
        (
            {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": RATIO, "weight": 101}]}},
            "weight",
        ),
        ({"gpuShareUnsupportedModels": [{"vendor": "x", "modle": "y"}]}, "modle"),
        ({"disableDeviceNUMATopologyAlignment": "yes"}, "disableDeviceNUMATopologyAlignment"),
        ({"scoringStrategies": {}}, "scoringStrategies"),
    ],
)
def test_bad_args_are_refused_naming_the_field(args: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgs, match=field):
        parse_args(args)


def test_device_objects_are_read_with_unhealthy_devices_and_topology() -> None:
    from koordshared.testing.devices import device, gpu, rdma

    obj = device("n", gpu(0), gpu(1, healthy=False, numa=None), rdma(0, vfs=2, vf_labels={"type": "vf"}))
    infos = dv.device_infos(json.loads(json.dumps(obj)))
    assert [(d.type, d.minor, d.health, d.uuid) for d in infos] == [
        ("gpu", 0, True, "GPU-0"),
        ("gpu", 1, False, "GPU-1"),
        ("rdma", 0, True, "0000:80:00.0"),
    ]
    assert infos[0].resources == {CORE: 100, RATIO: 100, MEM: 16 * GI}
    assert infos[0].topology is not None and infos[1].topology is None
    assert [v.bus_id for g in infos[2].vf_groups for v in g.vfs] == ["0000:80:00.1", "0000:80:00.2"]
