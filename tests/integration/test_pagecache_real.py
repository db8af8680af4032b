"""Page cache on the real kernel: a process in a memory cgroup the test makes writes a file, and the
cgroup's memory.stat shows that much page cache charged to it (the node's /proc/meminfo holds at least
as much)."""

from __future__ import annotations

import contextlib
import subprocess
import uuid
from pathlib import Path

import pytest

from koordlet.system.cgstats import parse_memory_stat, parse_page_cache
from koordlet.system.paths import HostPaths
from koordlet.system.procfs import read_meminfo

pytestmark = [pytest.mark.root, pytest.mark.tool("dd")]

MEMORY = Path("/sys/fs/cgroup/memory")
MIB = 1024 * 1024


def test_written_file_is_page_cache_of_the_writers_cgroup(tmp_path: Path) -> None:
    if not (MEMORY / "memory.stat").exists():
        pytest.skip("needs the v1 memory controller at /sys/fs/cgroup/memory")
    cgroup = MEMORY / f"koordlet-test-pagecache-{uuid.uuid4().hex[:8]}"
    cgroup.mkdir()
    try:
        before = parse_page_cache((cgroup / "memory.stat").read_text())
        target = tmp_path / "cached.bin"
        write = f'exec dd if=/dev/zero of="{target}" bs=1M count=32 status=none'
        subprocess.run(
            ["sh", "-c", f'echo $$ > "{cgroup}/cgroup.procs" && {write}'],
            check=True,
            timeout=60,
        )
        text = (cgroup / "memory.stat").read_text()
        cached = parse_page_cache(text) - before
        assert 28 * MIB <= cached <= 40 * MIB, cached
        assert parse_memory_stat(text).page_cache == parse_page_cache(text)
        assert read_meminfo(HostPaths()).page_cache >= cached
    finally:
        # drop the charge with the file, then the cgroup (force_empty reclaims what is left)
        with contextlib.suppress(OSError):
            (tmp_path / "cached.bin").unlink()
        with contextlib.suppress(OSError):
            (cgroup / "memory.force_empty").write_text("0")
        with contextlib.suppress(OSError):
            cgroup.rmdir()
