"""The executor on per-device files (blkio v1, io.max/io.weight v2), page-rounded memory values and files
this kernel does not have."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from koordlet.api import CgroupUpdate
from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.testing import FakeClock
from tests.unit.koordlet.resourceexecutor.conftest import RecordingWriter

POD = "kubepods/besteffort/pod1"
READ_BPS = "blkio.throttle.read_bps_device"


def bps(value: str, owner: str = "BlkIOReconcile") -> CgroupUpdate:
    return CgroupUpdate(READ_BPS, POD, value, owner)


def test_v1_each_device_is_compared_and_cached_on_its_own(
    fake_host: Any,
    fake_clock: FakeClock,
    make_executor: Callable[..., ResourceExecutor],
    writer: RecordingWriter,
) -> None:
    fake_host.write_cgroup(READ_BPS, POD, "8:0 1048576\n8:16 200\n")
    ex = make_executor()
    results = ex.update_batch([bps("8:16 200"), bps("8:32 0"), bps("8:0 2097152")])
    assert [(r.written, r.skipped) for r in results] == [
        (False, "unchanged"),
        (False, "unchanged"),
        (True, ""),
    ]
    assert [v for _, v in writer.writes] == ["8:0 2097152"]
    assert [r.skipped for r in ex.update_batch([bps("8:16 200"), bps("8:0 2097152")])] == ["unchanged"] * 2
    # two devices of one file are two cache entries, so both are re-checked and neither hides the other:
    # 8:16 changed out of band is repaired although 8:0 was written to the same file after it
    fake_host.write_cgroup(READ_BPS, POD, "8:0 2097152\n8:16 300\n")
    fake_clock.advance(61)
    assert "8:16 200" in [r.update.value for r in ex.reconcile_owned() if r.written]


def test_v1_zero_is_written_to_remove_a_device_limit(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], writer: RecordingWriter
) -> None:
    fake_host.write_cgroup(READ_BPS, POD, "8:0 1048576\n")
    ex = make_executor()
    assert ex.update(bps("8:0 0")).written
    assert writer.writes[-1][1] == "8:0 0"


def test_v2_throttles_go_to_io_max_and_compare_per_key(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], writer: RecordingWriter
) -> None:
    fake_host.use_cgroup_v2()
    fake_host.mkcgroup(None, POD)
    (fake_host.paths.cgroup_root / POD / "io.max").write_text(
        "8:0 rbps=1048576 wbps=max riops=max wiops=max\n"
    )
    ex = make_executor()
    assert ex.update(bps("8:0 1048576")).skipped == "unchanged"
    assert (
        ex.update(CgroupUpdate("blkio.throttle.write_bps_device", POD, "8:0 0", "b")).skipped == "unchanged"
    )
    assert ex.update(bps("8:0 0")).written
    assert writer.writes[-1] == (str(fake_host.paths.cgroup_root / POD / "io.max"), "8:0 rbps=max")
    assert ex.update(CgroupUpdate("blkio.cost.weight", POD, "8:0 50", "b")).skipped == "unsupported"
    (fake_host.paths.cgroup_root / POD / "io.weight").write_text("default 100\n")
    assert ex.update(CgroupUpdate("blkio.cost.weight", POD, "8:0 50", "b")).written
    assert writer.writes[-1][1] == "8:0 50"


def test_memory_bytes_are_page_rounded_so_a_rewrite_is_no_change(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], writer: RecordingWriter
) -> None:
    fake_host.use_cgroup_v2()
    fake_host.write_cgroup("memory.min", POD, "0")
    ex = make_executor()
    assert ex.update(CgroupUpdate("memory.min", POD, "10000", "c")).written
    assert writer.writes[-1][1] == "8192"
    # the kernel shows what it kept (whole pages): asking again for 10000 is no change
    ex.release("c")
    assert ex.update(CgroupUpdate("memory.min", POD, "10000", "c")).skipped == "unchanged"


def test_a_file_this_kernel_lacks_is_unsupported_not_gone(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor]
) -> None:
    fake_host.mkcgroup(None, POD)
    ex = make_executor()
    res = ex.update(CgroupUpdate("memory.wmark_ratio", POD, "95", "c"))
    assert (res.written, res.skipped, res.error) == (False, "unsupported", "")
    assert ex.update(CgroupUpdate("memory.wmark_ratio", POD + "x", "95", "c")).skipped == "gone"


def test_soft_limit_is_v1_only_and_minus_one_is_written_as_is(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], writer: RecordingWriter
) -> None:
    fake_host.write_cgroup("memory.soft_limit_in_bytes", POD, "9223372036854771712")
    ex = make_executor()
    assert ex.update(CgroupUpdate("memory.soft_limit_in_bytes", POD, "-1", "c")).skipped == "unchanged"
    assert ex.update(CgroupUpdate("memory.soft_limit_in_bytes", POD, "1048576", "c")).written
    assert ex.update(CgroupUpdate("memory.soft_limit_in_bytes", POD, "-1", "c")).written
    assert writer.writes[-1][1] == "-1"
