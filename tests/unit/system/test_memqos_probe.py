"""Which memory QoS knobs a kernel offers, probed on fake v1 (upstream and Anolis-like) and v2 trees."""

from __future__ import annotations

from typing import Any

from koordlet.system.cgroups import CgroupMode
from koordlet.system.probes import supported_memory_qos


def test_upstream_v1_has_only_the_soft_limit(fake_host: Any) -> None:
    fake_host.write_cgroup("memory.soft_limit_in_bytes", "", "9223372036854771712")
    assert supported_memory_qos(fake_host.paths, CgroupMode.V1) == {"memory.soft_limit_in_bytes"}


def test_anolis_like_v1_offers_its_extra_files(fake_host: Any) -> None:
    for knob in ("memory.soft_limit_in_bytes", "memory.min", "memory.low", "memory.wmark_ratio"):
        fake_host.write_cgroup(knob, "", "0")
    assert supported_memory_qos(fake_host.paths, CgroupMode.V1) == {
        "memory.soft_limit_in_bytes",
        "memory.min",
        "memory.low",
        "memory.wmark_ratio",
    }


def test_v2_offers_min_low_high_in_children_and_never_the_v1_soft_limit(fake_host: Any) -> None:
    fake_host.use_cgroup_v2()
    for knob in ("memory.min", "memory.low", "memory.high", "memory.oom.group"):
        fake_host.enable_feature(knob)
    assert supported_memory_qos(fake_host.paths, CgroupMode.V2) == {
        "memory.min",
        "memory.low",
        "memory.high",
        "memory.oom.group",
    }
