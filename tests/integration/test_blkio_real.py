"""Block I/O throttling on the real kernel: a loop device resolved to major:minor, a read limit written by
the executor into a real blkio cgroup, and ``dd`` of the device (direct I/O) from a process in that cgroup
reads at the limit. The test makes the backing file, the loop device and the cgroup, and removes them."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from koordlet.api import CgroupUpdate
from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.system import blkio
from koordlet.system.cgroups import CgroupMode
from koordlet.system.paths import HostPaths

pytestmark = [pytest.mark.root, pytest.mark.tool("losetup", "dd"), pytest.mark.slow]

BLKIO = Path("/sys/fs/cgroup/blkio")
READ_BPS = "blkio.throttle.read_bps_device"
MIB = 1024 * 1024


@pytest.fixture
def blkio_cgroup() -> Iterator[str]:
    if not (BLKIO / READ_BPS).exists():
        pytest.skip("the v1 blkio controller with throttling is not mounted here")
    name = f"koordlet-test-blkio-{uuid.uuid4().hex[:8]}"
    (BLKIO / name).mkdir()
    try:
        yield name
    finally:
        with contextlib.suppress(OSError):
            (BLKIO / name).rmdir()


def _timed_read(cgroup: str, dev: str, mib: int) -> float:
    """Seconds ``dd`` takes to read ``mib`` MiB of ``dev`` with O_DIRECT from inside ``cgroup``."""
    start = time.monotonic()
    # the shell joins the cgroup, then becomes dd: every read bio is charged to the cgroup
    subprocess.run(
        [
            "sh",
            "-c",
            f'echo $$ > "{BLKIO / cgroup}/cgroup.procs" && exec dd if="{dev}" of=/dev/null bs=256k '
            f"count={mib * 4} iflag=direct status=none",
        ],
        check=True,
        timeout=120,
    )
    return time.monotonic() - start


def divmod_dev(rdev: int) -> tuple[int, int]:
    return os.major(rdev), os.minor(rdev)


def test_read_throttle_on_a_loop_device_holds_the_measured_rate(loop_device: str, blkio_cgroup: str) -> None:
    paths = HostPaths()
    dev = blkio.resolve_device_name(paths, loop_device)
    assert (dev.major, dev.minor) == divmod_dev(os.stat(loop_device).st_rdev)

    ex = ResourceExecutor(paths, registry=CollectorRegistry(), mode=CgroupMode.V1)
    unthrottled = 16 / _timed_read(blkio_cgroup, loop_device, 16)

    limit = 4 * MIB
    assert unthrottled > 3 * limit / MIB, f"the loop device itself reads only {unthrottled:.1f} MiB/s"
    res = ex.update(CgroupUpdate(READ_BPS, blkio_cgroup, f"{dev} {limit}", "test"))
    assert res.written, res
    assert blkio.parse_device_values((BLKIO / blkio_cgroup / READ_BPS).read_text()) == {dev: limit}

    mib = 12
    measured = mib * MIB / _timed_read(blkio_cgroup, loop_device, mib)
    print(f"unthrottled {unthrottled:.1f} MiB/s, throttled {measured / MIB:.2f} MiB/s")
    assert abs(measured - limit) <= 0.15 * limit, f"read at {measured / MIB:.2f} MiB/s, limit 4 MiB/s"

    # 0 removes the device's line, and the executor reads that as "no limit" from then on
    assert ex.update(CgroupUpdate(READ_BPS, blkio_cgroup, f"{dev} 0", "test")).written
    assert (BLKIO / blkio_cgroup / READ_BPS).read_text().strip() == ""
    assert ex.update(CgroupUpdate(READ_BPS, blkio_cgroup, f"{dev} 0", "test")).skipped == "unchanged"
    assert blkio.parse_device_values((BLKIO / blkio_cgroup / READ_BPS).read_text()) == {}
