"""Which memory QoS knobs a kernel offers, probed on fake v1 (upstream and Anolis-like) and v2 trees,
and the byte values their validators let through."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from koordlet.system.cgroups import CgroupMode, validate
from koordlet.system.cgroupvalues import page_size
from koordlet.system.probes import supports_resource
from koordshared.runtime.errors import InvalidValue

KNOBS = (
    "memory.min",
    "memory.low",
    "memory.high",
    "memory.soft_limit_in_bytes",
    "memory.wmark_ratio",
    "memory.oom.group",
)


def offered(fake_host: Any, mode: CgroupMode) -> set[str]:
    return {k for k in KNOBS if supports_resource(fake_host.paths, mode, k)}


def test_upstream_v1_has_only_the_soft_limit(fake_host: Any) -> None:
    fake_host.write_cgroup("memory.soft_limit_in_bytes", "", "9223372036854771712")
    assert offered(fake_host, CgroupMode.V1) == {"memory.soft_limit_in_bytes"}


def test_anolis_like_v1_offers_its_extra_files(fake_host: Any) -> None:
    for knob in ("memory.soft_limit_in_bytes", "memory.min", "memory.low", "memory.wmark_ratio"):
        fake_host.write_cgroup(knob, "", "0")
    assert offered(fake_host, CgroupMode.V1) == {
        "memory.soft_limit_in_bytes",
        "memory.min",
        "memory.low",
        "memory.wmark_ratio",
    }


def test_v2_offers_min_low_high_in_children_and_never_the_v1_soft_limit(fake_host: Any) -> None:
    fake_host.use_cgroup_v2()
    for knob in ("memory.min", "memory.low", "memory.high", "memory.oom.group"):
        fake_host.enable_feature(knob)
    assert offered(fake_host, CgroupMode.V2) == {
        "memory.min",
        "memory.low",
        "memory.high",
        "memory.oom.group",
    }


@given(
    resource=st.sampled_from(["memory.min", "memory.low", "memory.high", "memory.soft_limit_in_bytes"]),
    value=st.integers(-(1 << 64), 1 << 64),
)
def test_memory_values_that_pass_are_whole_pages_within_the_kernel_range(resource: str, value: int) -> None:
    page = page_size()
    try:
        out = int(validate(resource, str(value)))
    except InvalidValue:
        assert value < -1 or value > (1 << 63) - 1
        return
    assert out == -1 or (0 <= out <= value and out % page == 0 and value - out < page)
