"""Reading device quantities (an allocation annotation, a Device's resources) without an exact
``Fraction`` per entry when each is a plain integer of its unit, with the same values as the exact path
(which still reads the rest)."""

from __future__ import annotations

import json

import pytest

from koordshared.apis.extension import deviceshare as ds
from koordshared.apis.extension.deviceshare import ANNOTATION_DEVICE_ALLOCATED, parse_device_allocations
from koordshared.apis.scheduling import device as dv
from koordshared.runtime.errors import InvalidValue
from tests.support.counting import count_calls


def annotated(resources: dict[str, object]) -> dict[str, str]:
    return {ANNOTATION_DEVICE_ALLOCATED: json.dumps({"gpu": [{"minor": 0, "resources": resources}]})}


def test_integer_quantities_of_an_allocation_are_read_without_the_exact_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exact = count_calls(monkeypatch, ds, "parse_quantity")
    got = parse_device_allocations(
        annotated(
            {dv.RESOURCE_GPU_CORE: "50", dv.RESOURCE_GPU_MEMORY: "8Gi", dv.RESOURCE_GPU_MEMORY_RATIO: 50}
        )
    )
    assert got is not None
    assert dict(got["gpu"][0].resources) == {
        dv.RESOURCE_GPU_CORE: 50,
        dv.RESOURCE_GPU_MEMORY: 8 * 2**30,
        dv.RESOURCE_GPU_MEMORY_RATIO: 50,
    }
    assert exact.n == 0  # it was one a resource
    # Below the unit, rounded up as Koordinator's Value() does, by the exact path.
    got = parse_device_allocations(annotated({dv.RESOURCE_GPU_CORE: "500m", "cpu": "1.5"}))
    assert got is not None and dict(got["gpu"][0].resources) == {dv.RESOURCE_GPU_CORE: 1, "cpu": 1500}
    assert exact.n == 1  # 1.5 cpu is 1500 millicores, an integer of its unit
    with pytest.raises(InvalidValue):
        parse_device_allocations(annotated({dv.RESOURCE_GPU_CORE: True}))
    with pytest.raises(InvalidValue):
        parse_device_allocations(annotated({dv.RESOURCE_GPU_CORE: "lots"}))


def test_a_devices_integer_resources_are_read_without_the_exact_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exact = count_calls(monkeypatch, dv, "parse_resource_list")
    assert dv.resource_values({dv.RESOURCE_GPU_CORE: "100", dv.RESOURCE_GPU_MEMORY: "16Gi"}) == {
        dv.RESOURCE_GPU_CORE: 100,
        dv.RESOURCE_GPU_MEMORY: 16 * 2**30,
    }
    assert exact.n == 0
    # An entry that is no quantity is left out, one below the unit rounded up: the exact path.
    assert dv.resource_values({dv.RESOURCE_GPU_CORE: "0.5", "x": "lots", "y": [1]}) == {
        dv.RESOURCE_GPU_CORE: 1
    }
    assert exact.n == 1
