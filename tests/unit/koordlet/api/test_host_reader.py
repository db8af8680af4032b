"""One contract for ``api.HostReader`` (and writes through ``api.ResourceWriter``), run against the plugin
kit's fakes and the agent's real reader and executor.

The real reader (``koordlet.system.host.Host``) reads a FakeHost tree written as the kernel writes it
(v2 quotas in ``cpu.max``, cpusets in ``cpuset.cpus.effective``); the fake (``koordlet.testing``) holds
values in a dict. Every check below runs on both, on cgroup v1 and v2, so a plugin tested on the fake
sees exactly what it would see on a host.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest
from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.system.host import Host
from koordlet.system.podpath import CgroupDriver
from koordlet.testing import QOS_TIER, FakeExecutor, FakeHostReader, topology
from tests.support.fakehost import FakeHost, make_block_device

TIER_BE = QOS_TIER[api.KubeQOSClass.BESTEFFORT]
CPUS = topology(cores=4)


class Subject(Protocol):
    """A host reader under test and the means to shape the host it reads."""

    reader: api.HostReader
    writer: api.ResourceWriter

    def cgroup(self, cgroup_dir: str, *, quota: int | None = None, cpuset: str | None = None) -> None:
        """Create ``cgroup_dir`` (and parents); set its CFS quota (-1 = unlimited) and cpuset."""

    def remove(self, cgroup_dir: str) -> None:
        """Remove ``cgroup_dir`` and its descendants, as the kubelet does."""

    def disk(self, name: str, dev: str) -> None:
        """A block device ``name`` with number ``dev`` (``major:minor``)."""


class FakeSubject:
    def __init__(self, version: int) -> None:
        self.fake = FakeHostReader(version, CPUS)
        self.fake.supported |= {"cpu.shares"}
        self.reader: api.HostReader = self.fake
        self.writer: api.ResourceWriter = FakeExecutor(self.fake)

    def cgroup(self, cgroup_dir: str, *, quota: int | None = None, cpuset: str | None = None) -> None:
        values = {"cpu_cfs_quota_us": str(quota)} if quota is not None else {}
        if cpuset is not None:
            values["cpuset_cpus"] = cpuset
        self.fake.add_cgroup(cgroup_dir, **values)

    def remove(self, cgroup_dir: str) -> None:
        self.fake.remove_cgroup(cgroup_dir)

    def disk(self, name: str, dev: str) -> None:
        self.fake.block_devices[name] = dev


class RealSubject:
    def __init__(self, version: int, tmp_path: Path) -> None:
        self.host = FakeHost(tmp_path)
        if version == 2:
            self.host.use_cgroup_v2()
        self.host.set_online_cpus(c.cpu for c in CPUS)
        for resource in ("cpu.cfs_quota_us", "cpuset.cpus", "cpu.shares"):
            self.host.enable_feature(resource, "max 100000" if version == 2 and "quota" in resource else "-1")
        self.version = version
        self.reader: api.HostReader = Host(self.host.paths, driver=CgroupDriver.CGROUPFS)
        self.writer: api.ResourceWriter = ResourceExecutor(
            self.host.paths, registry=CollectorRegistry(), mode=self.host.mode
        )

    def cgroup(self, cgroup_dir: str, *, quota: int | None = None, cpuset: str | None = None) -> None:
        self.host.mkcgroup(None, cgroup_dir)
        if quota is not None:
            # what the kernel shows: v1 cpu.cfs_quota_us, v2 "quota period" (or "max period") in cpu.max
            text = str(quota) if self.version == 1 else f"{'max' if quota < 0 else quota} 100000"
            self.host.write_cgroup("cpu.cfs_quota_us", cgroup_dir, text)
        if cpuset is not None:
            self.host.write_cgroup("cpuset.cpus", cgroup_dir, cpuset)

    def remove(self, cgroup_dir: str) -> None:
        for d in sorted(self.host.paths.cgroup_root.rglob("*"), key=lambda p: -len(p.parts)):
            rel = self._rel(d)
            if d.is_dir() and rel is not None and (rel == cgroup_dir or rel.startswith(cgroup_dir + "/")):
                for f in d.iterdir():
                    f.unlink()
                d.rmdir()

    def disk(self, name: str, dev: str) -> None:
        make_block_device(self.host.paths.sys_root, name, dev)

    def _rel(self, d: Path) -> str | None:
        rel = d.relative_to(self.host.paths.cgroup_root).as_posix()
        if self.version == 2:
            return rel
        _, _, rest = rel.partition("/")  # strip the v1 controller directory
        return rest or None


@pytest.fixture(params=[("fake", 1), ("fake", 2), ("real", 1), ("real", 2)], ids=lambda p: f"{p[0]}-v{p[1]}")
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Subject]:
    kind, version = request.param
    yield FakeSubject(version) if kind == "fake" else RealSubject(version, tmp_path)


def version_of(request: pytest.FixtureRequest) -> int:
    return int(request.node.callspec.params["subject"][1])


def test_version_and_qos_tiers(subject: Subject, request: pytest.FixtureRequest) -> None:
    assert subject.reader.cgroup_version() == version_of(request)
    assert {q: subject.reader.qos_cgroup_dir(q) for q in api.KubeQOSClass} == QOS_TIER


@pytest.mark.parametrize("quota", [-1, 50000, 1000])
def test_a_quota_reads_as_its_v1_value_on_both_versions(subject: Subject, quota: int) -> None:
    subject.cgroup(f"{TIER_BE}/pod1", quota=quota)
    assert subject.reader.read("cpu.cfs_quota_us", f"{TIER_BE}/pod1") == str(quota)


def test_a_cpuset_reads_as_a_kernel_cpu_list(subject: Subject) -> None:
    subject.cgroup(TIER_BE, cpuset="0-1,3")
    text = subject.reader.read("cpuset.cpus", TIER_BE)
    assert text is not None and api.parse_cpuset(text) == {0, 1, 3}


def test_a_vanished_cgroup_reads_as_none_and_lists_as_nothing(subject: Subject) -> None:
    subject.cgroup(f"{TIER_BE}/pod1/c1", quota=-1)
    subject.remove(f"{TIER_BE}/pod1")
    assert subject.reader.read("cpu.cfs_quota_us", f"{TIER_BE}/pod1/c1") is None
    assert subject.reader.read("cpu.cfs_quota_us", f"{TIER_BE}/pod1") is None
    assert list(subject.reader.list_cgroups(f"{TIER_BE}/pod1", 2)) == []


def test_list_cgroups_parents_first_down_to_depth(subject: Subject) -> None:
    for d in ("pod1/c1/deeper", "pod1/c2", "pod2"):
        subject.cgroup(f"{TIER_BE}/{d}")
    got = list(subject.reader.list_cgroups(TIER_BE, 2))
    assert got == [TIER_BE, f"{TIER_BE}/pod1", f"{TIER_BE}/pod2", f"{TIER_BE}/pod1/c1", f"{TIER_BE}/pod1/c2"]
    assert list(subject.reader.list_cgroups(f"{TIER_BE}/pod2", 0)) == [f"{TIER_BE}/pod2"]


def test_supports_and_topology(subject: Subject) -> None:
    assert subject.reader.supports("cpu.cfs_quota_us") and subject.reader.supports("cpuset.cpus")
    topo = list(subject.reader.cpu_topology())
    assert [c.cpu for c in topo] == sorted(c.cpu for c in CPUS)
    assert {(c.cpu, c.core) for c in topo} == {(c.cpu, c.core) for c in CPUS}


@pytest.mark.parametrize("value", ["-1", "50000"])
def test_a_quota_written_through_the_executor_reads_back_as_written(subject: Subject, value: str) -> None:
    subject.cgroup(f"{TIER_BE}/pod1", quota=20000)
    result = subject.writer.update(api.CgroupUpdate("cpu.cfs_quota_us", f"{TIER_BE}/pod1", value, owner="t"))
    assert result.ok and result.written, result
    assert subject.reader.read("cpu.cfs_quota_us", f"{TIER_BE}/pod1") == value


def test_a_write_to_a_vanished_cgroup_is_skipped_as_gone(subject: Subject) -> None:
    subject.cgroup(f"{TIER_BE}/pod1", quota=20000)
    subject.remove(f"{TIER_BE}/pod1")
    result = subject.writer.update(
        api.CgroupUpdate("cpu.cfs_quota_us", f"{TIER_BE}/pod1", "30000", owner="t")
    )
    assert (result.written, result.skipped, result.error) == (False, "gone", "")


def test_block_devices_by_name(subject: Subject) -> None:
    subject.disk("vdb", "252:16")
    assert subject.reader.block_device("vdb") == subject.reader.block_device("/dev/vdb") == "252:16"
    with pytest.raises(api.ResourceUnsupported):
        subject.reader.block_device("nvme7n1")


def test_a_host_without_resctrl_says_why(subject: Subject) -> None:
    why = subject.reader.resctrl_unsupported()
    assert isinstance(why, str) and why
