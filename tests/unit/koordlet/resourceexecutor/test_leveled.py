"""Leveled updates against a fake that enforces cgroup v1's hierarchy rules on every single write.

The fake refuses what the kernel refuses: a cpuset child wider than its parent (EACCES), a parent
narrower than a child (EBUSY), a cfs quota above the parent's or a parent quota below a child's (EINVAL).
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from koordlet.api import CgroupUpdate
from koordlet.api.cpulist import format_cpuset, parse_cpuset
from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.testing import FakeClock
from tests.support.fakehost import FakeHost
from tests.unit.koordlet.resourceexecutor.conftest import RecordingWriter

CPUS = range(8)
UNLIMITED = -1


class V1Rules:
    """Checks a write against the current fake tree; records the tree after every accepted write."""

    def __init__(self, root: Path, resource: str) -> None:
        self.root = root
        self.resource = resource
        self.snapshots: list[dict[str, str]] = []

    def _value(self, d: Path) -> str | None:
        f = d / self.resource
        return f.read_text().strip() if f.exists() else None

    def _wider(self, child: str, parent: str) -> bool:
        if self.resource == "cpuset.cpus":
            return not parse_cpuset(child) <= parse_cpuset(parent)
        c, p = int(child), int(parent)
        return p != UNLIMITED and (c == UNLIMITED or c > p)

    def check(self, path: str, value: str) -> int:
        if not path.endswith("/" + self.resource):
            return 0
        d = Path(path).parent
        parent = self._value(d.parent) if d.parent != self.root else None
        if parent is not None and self._wider(value, parent):
            return errno.EACCES if self.resource == "cpuset.cpus" else errno.EINVAL
        for child in d.iterdir():
            cv = self._value(child) if child.is_dir() else None
            if cv is not None and self._wider(cv, value):
                return errno.EBUSY if self.resource == "cpuset.cpus" else errno.EINVAL
        return 0


def tree_values(root: Path, resource: str) -> dict[str, str]:
    return {str(f.parent.relative_to(root)): f.read_text().strip() for f in sorted(root.rglob(resource))}


def assert_nested(values: dict[str, str], resource: str) -> None:
    for d, v in values.items():
        parent = str(Path(d).parent)
        if parent in values:
            if resource == "cpuset.cpus":
                assert parse_cpuset(v) <= parse_cpuset(values[parent]), (d, v, values[parent])
            else:
                p = int(values[parent])
                assert p == UNLIMITED or (int(v) != UNLIMITED and int(v) <= p), (d, v, p)


@st.composite
def cpuset_tree(draw: st.DrawFn, shape: list[int]) -> list[str]:
    """Values for [qos, pod_0..pod_n, containers...] nested by ``shape`` (containers per pod)."""

    def sub(of: frozenset[int]) -> frozenset[int]:
        picked = draw(st.sets(st.sampled_from(sorted(of)), min_size=1))
        return frozenset(picked)

    qos = sub(frozenset(CPUS))
    pods = [sub(qos) for _ in shape]
    containers = [sub(p) for p, n in zip(pods, shape, strict=True) for _ in range(n)]
    return [format_cpuset(s) for s in [qos, *pods, *containers]]


@st.composite
def quota_tree(draw: st.DrawFn, shape: list[int]) -> list[str]:
    def below(limit: int) -> int:
        if limit == UNLIMITED:
            return draw(st.one_of(st.just(UNLIMITED), st.integers(1000, 1_000_000)))
        return draw(st.integers(1000, limit))

    qos = below(UNLIMITED)
    pods = [below(qos) for _ in shape]
    containers = [below(p) for p, n in zip(pods, shape, strict=True) for _ in range(n)]
    return [str(v) for v in [qos, *pods, *containers]]


def _dirs(shape: list[int]) -> list[list[str]]:
    qos = "kubepods/besteffort"
    pods = [f"{qos}/pod{i}" for i in range(len(shape))]
    containers = [f"{pods[i]}/c{j}" for i, n in enumerate(shape) for j in range(n)]
    return [[qos], pods, containers]


def _run(tmp_path: Path, resource: str, data: st.DataObject) -> None:
    shape = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3), label="shape")
    tree = cpuset_tree if resource == "cpuset.cpus" else quota_tree
    initial = data.draw(tree(shape), label="initial")
    target = data.draw(tree(shape), label="target")
    host = FakeHost(tmp_path)
    host.set_online_cpus(CPUS)
    levels = _dirs(shape)
    flat = [d for level in levels for d in level]
    for d, v in zip(flat, initial, strict=True):
        host.write_cgroup(resource, d, v)
    subsystem_root = host.subsystem_dir(host.resource_subsystem(resource))
    rules = V1Rules(subsystem_root, resource)
    writer = RecordingWriter()
    writer.before_write = rules.check
    steps: list[dict[str, str]] = []

    def recording(items: Any) -> list[int]:
        out = writer(items)
        steps.append(tree_values(subsystem_root, resource))
        return out

    ex = ResourceExecutor(host.paths, clock=FakeClock(), registry=CollectorRegistry(), writer=recording)
    it = iter(target)
    updates = [[CgroupUpdate(resource, d, next(it), "test") for d in level] for level in levels]
    results = ex.leveled_update(updates)
    assert all(r.ok for r in results), [r.error for r in results if r.error]
    for snapshot in steps:
        assert_nested(snapshot, resource)
    final = tree_values(subsystem_root, resource)
    for d, want in zip(flat, target, strict=True):
        if resource == "cpuset.cpus":
            assert parse_cpuset(final[d]) == parse_cpuset(want)
        else:
            assert int(final[d]) == int(want)
    changed = {d for d, a, b in zip(flat, initial, target, strict=True) if a != b}
    assert {r.update.cgroup_dir for r in results if r.written} == changed


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_leveled_cpuset_never_breaks_v1_nesting(tmp_path_factory: Any, data: st.DataObject) -> None:
    _run(tmp_path_factory.mktemp("cpuset"), "cpuset.cpus", data)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_leveled_quota_never_breaks_v1_nesting(tmp_path_factory: Any, data: st.DataObject) -> None:
    _run(tmp_path_factory.mktemp("quota"), "cpu.cfs_quota_us", data)


def test_flat_batch_in_the_wrong_order_is_refused_by_the_fake(tmp_path: Path) -> None:
    """The fake really bites: growing child-first through update_batch hits EACCES."""
    host = FakeHost(tmp_path)
    host.set_online_cpus(CPUS)
    host.write_cgroup("cpuset.cpus", "qos", "0")
    host.write_cgroup("cpuset.cpus", "qos/pod", "0")
    rules = V1Rules(host.subsystem_dir("cpuset"), "cpuset.cpus")
    writer = RecordingWriter()
    writer.before_write = rules.check
    ex = ResourceExecutor(host.paths, clock=FakeClock(), registry=CollectorRegistry(), writer=writer)
    bad = ex.update_batch([CgroupUpdate("cpuset.cpus", d, "0-3", "t") for d in ("qos/pod", "qos")])
    assert f"errno {errno.EACCES}" in bad[0].error and bad[1].written
    ok = ex.leveled_update(
        [[CgroupUpdate("cpuset.cpus", "qos", "1", "t")], [CgroupUpdate("cpuset.cpus", "qos/pod", "1", "t")]]
    )
    assert all(r.written for r in ok)
    assert host.read_cgroup("cpuset.cpus", "qos") == "1"
    assert host.read_cgroup("cpuset.cpus", "qos/pod") == "1"
    assert [e["phase"] for e in ex.events()] == ["final", "merge", "final", "final"]
