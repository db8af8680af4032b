"""Memory QoS knobs and system tunables written and restored on this machine: a memory cgroup the test
makes under the real v1 hierarchy, and ``/proc/sys/vm`` itself (put back even when the test fails)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from koordlet.api import CgroupUpdate
from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.system import sysctl
from koordlet.system.cgroups import MEMORY_UNLIMITED_V1, CgroupMode, detect_mode
from koordlet.system.cgroupvalues import page_size
from koordlet.system.paths import HostPaths
from koordlet.system.probes import supports_resource

pytestmark = pytest.mark.root

MEMORY = Path("/sys/fs/cgroup/memory")
MEMORY_QOS_RESOURCES = (
    "memory.min",
    "memory.low",
    "memory.high",
    "memory.soft_limit_in_bytes",
    "memory.wmark_ratio",
    "memory.wmark_scale_factor",
    "memory.wmark_min_adj",
    "memory.priority",
    "memory.use_priority_oom",
    "memory.oom.group",
)


@pytest.fixture
def memory_cgroup() -> Iterator[str]:
    if detect_mode(HostPaths()) is not CgroupMode.V1 or not MEMORY.is_dir():
        pytest.skip("needs the v1 memory controller mounted at /sys/fs/cgroup/memory")
    name = f"koordlet-test-memqos-{uuid.uuid4().hex[:8]}"
    (MEMORY / name).mkdir()
    try:
        yield name
    finally:
        with contextlib.suppress(OSError):
            (MEMORY / name).rmdir()


def test_memory_qos_knobs_this_kernel_has_are_written_and_restored(memory_cgroup: str) -> None:
    paths = HostPaths()
    offered = {r for r in MEMORY_QOS_RESOURCES if supports_resource(paths, CgroupMode.V1, r)}
    # the probe agrees with the files a fresh cgroup really has
    assert offered == {r for r in MEMORY_QOS_RESOURCES if (MEMORY / memory_cgroup / r).exists()}
    assert "memory.soft_limit_in_bytes" in offered

    ex = ResourceExecutor(paths, registry=CollectorRegistry(), mode=CgroupMode.V1)
    soft = MEMORY / memory_cgroup / "memory.soft_limit_in_bytes"
    original = soft.read_text().strip()
    assert int(original) >= MEMORY_UNLIMITED_V1
    wanted = 64 * 1024 * 1024 + 123
    res = ex.update(CgroupUpdate("memory.soft_limit_in_bytes", memory_cgroup, str(wanted), "CgroupReconcile"))
    assert res.written, res
    assert int(soft.read_text()) == wanted // page_size() * page_size()
    # asking again is no change: the executor rounded as the kernel does
    ex.release("CgroupReconcile")
    again = ex.update(
        CgroupUpdate("memory.soft_limit_in_bytes", memory_cgroup, str(wanted), "CgroupReconcile")
    )
    assert again.skipped == "unchanged"
    # knobs this kernel lacks are reported unsupported and nothing is created
    for missing in sorted(set(MEMORY_QOS_RESOURCES) - offered):
        r = ex.update(CgroupUpdate(missing, memory_cgroup, "1", "CgroupReconcile"))
        assert r.skipped == "unsupported", (missing, r)
        assert not (MEMORY / memory_cgroup / missing).exists()

    restored = ex.update(CgroupUpdate("memory.soft_limit_in_bytes", memory_cgroup, "-1", "CgroupReconcile"))
    assert restored.written
    assert soft.read_text().strip() == original


@pytest.fixture
def saved_vm_sysctls() -> Iterator[dict[str, str]]:
    """The current values, written back raw at the end whatever the executor did."""
    paths = HostPaths()
    names = ("min_free_kbytes", "watermark_scale_factor")
    saved = {n: sysctl.read(paths, n) or "" for n in names}
    try:
        yield saved
    finally:
        for name, value in saved.items():
            path = sysctl.get_sysctl(name).path(paths)
            if path.read_text().strip() != value:
                path.write_text(value)


def test_vm_sysctls_are_written_and_restored(saved_vm_sysctls: dict[str, str]) -> None:
    paths = HostPaths()
    ex = ResourceExecutor(paths, registry=CollectorRegistry(), mode=CgroupMode.V1)
    mfk = int(saved_vm_sysctls["min_free_kbytes"])
    wsf = int(saved_vm_sysctls["watermark_scale_factor"])
    new_mfk = min(max(mfk + 1024, 10240), 10485760)
    new_wsf = 20 if wsf != 20 else 30
    assert ex.sysctl.update("min_free_kbytes", str(new_mfk), owner="SystemConfig").written
    assert ex.sysctl.update("watermark_scale_factor", str(new_wsf), owner="SystemConfig").written
    assert sysctl.read(paths, "min_free_kbytes") == str(new_mfk)
    assert sysctl.read(paths, "watermark_scale_factor") == str(new_wsf)
    # out of range: refused, the kernel untouched
    assert ex.sysctl.update("watermark_scale_factor", "401", owner="SystemConfig").error
    assert sysctl.read(paths, "watermark_scale_factor") == str(new_wsf)

    results = ex.sysctl.restore("SystemConfig")
    assert [r.written for r in results] == [True, True]
    assert sysctl.read(paths, "min_free_kbytes") == saved_vm_sysctls["min_free_kbytes"]
    assert sysctl.read(paths, "watermark_scale_factor") == saved_vm_sysctls["watermark_scale_factor"]
