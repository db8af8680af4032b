"""The executor on the real cgroup v1 kernel: leveled cpuset/quota changes, vanished cgroups, refusals.

Everything lives under a unique ``koordlet-test-<random>`` parent in the cpu and cpuset controllers and is
removed (deepest first) in the fixture's teardown, even when a test fails.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from koordlet.api import CgroupUpdate
from koordlet.api.cpulist import parse_cpuset
from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.system import cgroups, native
from koordlet.system.paths import HostPaths
from koordlet.testing import FakeClock
from koordlet.testing.cgroups import RealCgroupTree

pytestmark = pytest.mark.root

SUBSYSTEMS = ("cpu", "cpuset")


@dataclass
class Tree:
    """A pod with two containers under a unique parent, in the v1 cpu and cpuset controllers."""

    paths: HostPaths
    parent: str
    pod: str
    containers: tuple[str, str]

    def file(self, subsystem: str, cgroup_dir: str, name: str) -> Path:
        return self.paths.cgroup_root / subsystem / cgroup_dir / name

    def read(self, resource: str, cgroup_dir: str) -> str:
        sub = cgroups.get_resource(resource).subsystem
        return self.file(sub, cgroup_dir, resource).read_text().strip()

    @property
    def levels(self) -> list[list[str]]:
        return [[self.parent], [self.pod], list(self.containers)]


@pytest.fixture
def tree() -> Iterator[Tree]:
    paths = HostPaths()
    if cgroups.detect_mode(paths) is not cgroups.CgroupMode.V1:
        pytest.skip("needs cgroup v1 controllers")
    with RealCgroupTree(SUBSYSTEMS, root=paths.cgroup_root) as cg:
        yield Tree(paths, cg.parent, cg.mkdir("pod"), (cg.mkdir("pod/c0"), cg.mkdir("pod/c1")))


@pytest.fixture
def executor(tree: Tree) -> ResourceExecutor:
    return ResourceExecutor(tree.paths, registry=CollectorRegistry())


def _leveled(tree: Tree, resource: str, values: Sequence[str]) -> list[list[CgroupUpdate]]:
    it = iter(values)
    return [
        [CgroupUpdate(resource, d, next(it), "test", "integration") for d in level] for level in tree.levels
    ]


def _assert_all(tree: Tree, resource: str, values: Sequence[str]) -> None:
    dirs = [d for level in tree.levels for d in level]
    for d, want in zip(dirs, values, strict=True):
        got = tree.read(resource, d)
        if resource == "cpuset.cpus":
            assert parse_cpuset(got) == parse_cpuset(want), (d, got, want)
        else:
            assert int(got) == int(want), (d, got, want)


def test_leveled_cpuset_shrink_move_and_grow(tree: Tree, executor: ResourceExecutor) -> None:
    online = parse_cpuset(Path(tree.paths.sys("devices/system/cpu/online")).read_text())
    if len(online) < 2:
        pytest.skip("needs 2 online CPUs")
    lo, hi = sorted(online)[:2]
    both = f"{lo},{hi}" if hi != lo + 1 else f"{lo}-{hi}"
    steps = [
        [both, both, str(lo), str(lo)],  # shrink the leaves
        [both, str(hi), str(hi), str(hi)],  # move pod and containers to the other cpu: union first
        [str(hi), str(hi), str(hi), str(hi)],  # shrink the parent last
        [both, both, both, both],  # grow: parents first
    ]
    for values in steps:
        results = executor.leveled_update(_leveled(tree, "cpuset.cpus", values))
        assert all(r.ok for r in results), [r.error for r in results]
        _assert_all(tree, "cpuset.cpus", values)


def test_naive_order_is_refused_by_the_kernel_and_reported(tree: Tree, executor: ResourceExecutor) -> None:
    online = sorted(parse_cpuset(Path(tree.paths.sys("devices/system/cpu/online")).read_text()))
    if len(online) < 2:
        pytest.skip("needs 2 online CPUs")
    # shrinking a parent below its children's cpus: v1 says EBUSY, and the executor reports it
    before = parse_cpuset(tree.read("cpuset.cpus", tree.pod))
    assert parse_cpuset(tree.read("cpuset.cpus", tree.containers[0])) == before  # copied on mkdir
    res = executor.update(CgroupUpdate("cpuset.cpus", tree.pod, str(online[0]), "test"))
    assert f"errno {errno.EBUSY}" in res.error
    assert str(tree.file("cpuset", tree.pod, "cpuset.cpus")) in res.error
    assert f"'{online[0]}'" in res.error
    assert parse_cpuset(tree.read("cpuset.cpus", tree.pod)) == before
    # the leveled path gets there: children first
    results = executor.leveled_update(
        [
            [CgroupUpdate("cpuset.cpus", tree.pod, str(online[0]), "test")],
            [CgroupUpdate("cpuset.cpus", c, str(online[0]), "test") for c in tree.containers],
        ]
    )
    assert all(r.written for r in results), [r.error for r in results]


def test_leveled_quota_shrink_and_grow(tree: Tree, executor: ResourceExecutor) -> None:
    steps = [
        ["400000", "300000", "200000", "100000"],
        ["50000", "40000", "30000", "20000"],  # everything shrinks: children first
        ["90000", "90000", "90000", "90000"],  # everything grows: parents first
        ["-1", "60000", "60000", "-1"],
    ]
    for values in steps:
        results = executor.leveled_update(_leveled(tree, "cpu.cfs_quota_us", values))
        assert all(r.ok for r in results), [r.error for r in results]
        _assert_all(tree, "cpu.cfs_quota_us", values)


def test_cgroup_removed_mid_batch_is_skipped(tree: Tree) -> None:
    victim = tree.containers[1]
    victim_dir = tree.paths.cgroup_root / "cpu" / victim
    calls: list[str] = []

    def writer(items: Sequence[tuple[str | Path, str | bytes]]) -> list[int]:
        if not calls:
            victim_dir.rmdir()  # the pod's container exits between our first and second write
        calls.extend(str(p) for p, _ in items)
        return native.write_batch(items)

    ex = ResourceExecutor(tree.paths, registry=CollectorRegistry(), writer=writer)
    results = ex.update_batch(
        [CgroupUpdate("cpu.cfs_quota_us", d, "70000", "test") for d in (tree.containers[0], victim, tree.pod)]
    )
    assert [(r.written, r.skipped) for r in results] == [(True, ""), (False, "gone"), (True, "")]
    assert tree.read("cpu.cfs_quota_us", tree.containers[0]) == "70000"
    assert tree.read("cpu.cfs_quota_us", tree.pod) == "70000"


@pytest.mark.parametrize(
    ("resource", "value"),
    [
        ("cpu.cfs_quota_us", "-2"),
        ("cpu.cfs_quota_us", "500"),
        ("cpu.cfs_quota_us", "abc"),
        ("cpuset.cpus", "0-999"),
        ("cpuset.cpus", "zz"),
    ],
)
def test_invalid_values_refused_before_any_write(tree: Tree, resource: str, value: str) -> None:
    sub = cgroups.get_resource(resource).subsystem
    path = tree.file(sub, tree.pod, resource)
    before = path.read_text()
    stat_before = os.stat(path).st_mtime_ns
    writes: list[object] = []

    def writer(items: Sequence[tuple[str | Path, str | bytes]]) -> list[int]:
        writes.extend(items)
        return native.write_batch(items)

    ex = ResourceExecutor(tree.paths, registry=CollectorRegistry(), writer=writer)
    res = ex.update(CgroupUpdate(resource, tree.pod, value, "test"))
    assert res.error and repr(value) in res.error
    assert writes == []
    assert path.read_text() == before
    assert os.stat(path).st_mtime_ns == stat_before


def test_out_of_band_reset_is_repaired_within_one_force_period(tree: Tree) -> None:
    clock = FakeClock()
    ex = ResourceExecutor(tree.paths, registry=CollectorRegistry(), clock=clock)
    assert ex.update(CgroupUpdate("cpu.cfs_quota_us", tree.pod, "30000", "BECPUSuppress")).written
    quota_file = tree.file("cpu", tree.pod, "cpu.cfs_quota_us")
    assert native.write_batch([(quota_file, "-1")]) == [0]  # someone else un-throttles it
    clock.advance(59)
    assert ex.reconcile_owned() == []
    assert tree.read("cpu.cfs_quota_us", tree.pod) == "-1"
    clock.advance(1)
    assert [r.written for r in ex.reconcile_owned()] == [True]
    assert tree.read("cpu.cfs_quota_us", tree.pod) == "30000"
    assert ex.events()[-1]["before"] == "-1" and ex.events()[-1]["phase"] == "force"
