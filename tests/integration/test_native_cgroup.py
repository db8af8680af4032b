"""Both batch readers on real v1 cgroups: same values, ENODEV on a removed cgroup, reopen when it returns.

Cgroups live under a unique ``koordlet-test-<random>`` parent in cpuacct and memory, removed in teardown.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest

from koordlet.system import cgroups, native
from koordlet.system.batchread import FileKind
from koordlet.system.paths import HostPaths
from koordlet.testing.cgroups import RealCgroupTree
from tests.support.batchread import file_values

pytestmark = pytest.mark.root

IMPLS = ["python", pytest.param("native", marks=pytest.mark.native)]
MEM_KEYS = ("total_cache", "total_rss", "total_inactive_file", "total_active_file", "total_unevictable")


@pytest.fixture
def parents() -> Iterator[dict[str, Path]]:
    paths = HostPaths()
    if cgroups.detect_mode(paths) is not cgroups.CgroupMode.V1:
        pytest.skip("needs cgroup v1 controllers")
    with RealCgroupTree(("cpuacct", "memory"), root=paths.cgroup_root) as tree:
        yield {sub: tree.path(sub) for sub in tree.controllers}
        # the test's own child dirs, before the tree removes what it made
        for sub in tree.controllers:
            for child in sorted(
                (p for p in tree.path(sub).rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)
            ):
                child.rmdir()


@pytest.mark.parametrize("impl", IMPLS)
def test_reads_real_cgroups_and_survives_removal(parents: dict[str, Path], impl: str) -> None:
    dirs = []
    for i in range(3):
        for sub in ("cpuacct", "memory"):
            (parents[sub] / f"c{i}").mkdir()
        dirs.append(i)
    paths: list[Path] = []
    kinds: list[FileKind] = []
    keys: list[tuple[str, ...]] = []
    for i in dirs:
        paths += [parents["cpuacct"] / f"c{i}" / "cpuacct.usage", parents["memory"] / f"c{i}" / "memory.stat"]
        kinds += [FileKind.COUNTER, FileKind.KEY_VALUE]
        keys += [(), MEM_KEYS]
    with native.open_batch_reader(paths, kinds, keys, force_python=impl == "python") as reader:
        res = reader.read()
        assert res.status == [0] * 6
        for i in dirs:
            # an empty cgroup: usage is a number, every wanted memory.stat key exists
            assert isinstance(res.value(2 * i), int)
            stat = file_values(res, 2 * i + 1)
            assert isinstance(stat, dict) and all(v is not None and v >= 0 for v in stat.values())
        assert reader.open_fds() == 6
        (parents["cpuacct"] / "c1").rmdir()
        (parents["memory"] / "c1").rmdir()
        res = reader.read()
        # held descriptors of a removed cgroup read ENODEV; they are closed and dropped
        assert res.status == [0, 0, -errno.ENODEV, -errno.ENODEV, 0, 0]
        assert res.value(2) is None and file_values(res, 3) is None
        assert reader.open_fds() == 4
        assert reader.read().status[2:4] == [-errno.ENOENT, -errno.ENOENT]
        (parents["cpuacct"] / "c1").mkdir()
        (parents["memory"] / "c1").mkdir()
        res = reader.read()
        assert res.status == [0] * 6
        assert reader.open_fds() == 6


@pytest.mark.native
def test_native_and_python_agree_on_real_files(parents: dict[str, Path]) -> None:
    (parents["memory"] / "c").mkdir()
    paths = [parents["memory"] / "c" / "memory.stat", parents["memory"] / "c" / "memory.limit_in_bytes"]
    kinds = [FileKind.KEY_VALUE, FileKind.COUNTER]
    keys = [("cache", "rss", "total_cache", "hierarchical_memory_limit", "nope"), ()]
    with (
        native.open_batch_reader(paths, kinds, keys) as c_reader,
        native.open_batch_reader(paths, kinds, keys, force_python=True) as py_reader,
    ):
        c_res, py_res = c_reader.read(), py_reader.read()
    assert c_res.status == py_res.status == [0, 0]
    assert c_res.values == py_res.values
    assert c_res.value(0, 4) is None
    assert c_res.value(1) == c_res.value(0, 3)  # the unlimited limit, as both files print it
