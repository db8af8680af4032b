"""Executor behaviour on fake v1 and v2 trees: cache, force re-apply, validation, errors, audit, metrics."""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koordlet.api import CgroupUpdate, ResourceWriter
from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.system.cgroups import CgroupMode
from koordlet.testing import FakeClock
from tests.unit.koordlet.resourceexecutor.conftest import RecordingWriter

POD = "kubepods/besteffort/pod1"


def quota(value: str, cgroup_dir: str = POD, owner: str = "BECPUSuppress", **kw: Any) -> CgroupUpdate:
    return CgroupUpdate("cpu.cfs_quota_us", cgroup_dir, value, owner, reason="test", **kw)


def errors(reg: CollectorRegistry, resource: str, kind: str) -> float:
    return (
        reg.get_sample_value("koordlet_resource_update_errors_total", {"type": resource, "kind": kind}) or 0.0
    )


def test_implements_the_plugin_protocol(make_executor: Callable[..., ResourceExecutor]) -> None:
    ex: ResourceWriter = make_executor()
    assert isinstance(ex, ResourceExecutor)


def test_writes_then_skips_unchanged_value(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], writer: RecordingWriter
) -> None:
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "-1")
    ex = make_executor()
    assert ex.mode is CgroupMode.V1
    first = ex.update(quota("50000"))
    assert first.written and first.ok and first.skipped == ""
    assert fake_host.read_cgroup("cpu.cfs_quota_us", POD) == "50000"
    again = ex.update(quota("50000"))
    assert not again.written and again.skipped == "unchanged"
    assert len(writer.writes) == 1
    # the kernel already holding the value is a skip too, and is cached without a write
    fake_host.write_cgroup("cpu.shares", POD, "1024")
    assert ex.update(CgroupUpdate("cpu.shares", POD, "1024", "x")).skipped == "unchanged"
    assert len(writer.writes) == 1


def test_unlimited_spellings_and_cpusets_compare_semantically(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], writer: RecordingWriter
) -> None:
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "-1")
    fake_host.write_cgroup("cpuset.cpus", POD, "0-2")
    fake_host.write_cgroup("memory.limit_in_bytes", POD, "9223372036854771712")
    ex = make_executor()
    assert ex.update(CgroupUpdate("cpuset.cpus", POD, "2,1,0", "x")).skipped == "unchanged"
    assert ex.update(CgroupUpdate("memory.limit_in_bytes", POD, "-1", "x")).skipped == "unchanged"
    assert ex.update(quota("-1")).skipped == "unchanged"
    assert writer.writes == []


def test_out_of_band_change_is_repaired_after_the_force_period(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], fake_clock: FakeClock
) -> None:
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "-1")
    ex = make_executor()
    assert ex.update(quota("50000")).written
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "-1")  # e.g. the kubelet rewrites it
    fake_clock.advance(30)
    assert ex.update(quota("50000")).skipped == "unchanged"  # trusted cache within the period
    assert ex.reconcile_owned() == []
    assert fake_host.read_cgroup("cpu.cfs_quota_us", POD) == "-1"
    fake_clock.advance(31)
    repaired = ex.reconcile_owned()
    assert [r.written for r in repaired] == [True]
    assert fake_host.read_cgroup("cpu.cfs_quota_us", POD) == "50000"
    assert ex.events()[-1]["phase"] == "force"
    assert ex.events()[-1]["before"] == "-1"
    # nothing changed since: the next period re-checks without writing
    fake_clock.advance(61)
    assert [r.skipped for r in ex.reconcile_owned()] == ["unchanged"]


def test_update_after_force_period_rereads_the_kernel(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], fake_clock: FakeClock
) -> None:
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "-1")
    ex = make_executor(force_update_seconds=10)
    ex.update(quota("50000"))
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "70000")
    fake_clock.advance(10)
    assert ex.update(quota("50000")).written
    assert fake_host.read_cgroup("cpu.cfs_quota_us", POD) == "50000"


def test_release_stops_reapplying(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], fake_clock: FakeClock
) -> None:
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "-1")
    fake_host.write_cgroup("cpu.cfs_burst_us", POD, "0")
    ex = make_executor()
    ex.update(quota("50000", owner="A"))
    ex.update(CgroupUpdate("cpu.cfs_burst_us", POD, "1000", "B"))
    ex.release("A")
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "-1")
    fake_host.write_cgroup("cpu.cfs_burst_us", POD, "0")
    fake_clock.advance(61)
    results = ex.reconcile_owned()
    assert [r.update.owner for r in results] == ["B"]
    assert fake_host.read_cgroup("cpu.cfs_quota_us", POD) == "-1"
    assert fake_host.read_cgroup("cpu.cfs_burst_us", POD) == "1000"


@pytest.mark.parametrize(
    ("resource", "value"),
    [
        ("cpu.cfs_quota_us", "-2"),
        ("cpu.cfs_quota_us", "500"),
        ("cpu.cfs_quota_us", "abc"),
        ("cpu.cfs_quota_us", "99999999999999999999"),
        ("cpuset.cpus", "0-999"),
        ("cpuset.cpus", "zz"),
        ("cpuset.cpus", "5"),  # valid syntax, but only 0-3 are online
        ("cpu.shares", "1"),
        ("cpu.stat", "1"),
    ],
)
def test_invalid_values_are_refused_before_any_write(
    fake_host: Any,
    make_executor: Callable[..., ResourceExecutor],
    writer: RecordingWriter,
    registry: CollectorRegistry,
    resource: str,
    value: str,
) -> None:
    before = "0-3" if resource == "cpuset.cpus" else "100000"
    fake_host.write_cgroup(resource, POD, before)
    ex = make_executor()
    res = ex.update(CgroupUpdate(resource, POD, value, "x"))
    assert not res.written and not res.ok
    assert repr(value) in res.error
    assert POD in res.error
    assert writer.writes == []
    assert fake_host.read_cgroup(resource, POD) == before
    assert errors(registry, resource, "invalid") == 1
    assert ex.events() == []


def test_a_repeated_refusal_is_a_warning_once_per_force_period(
    fake_host: Any,
    make_executor: Callable[..., ResourceExecutor],
    fake_clock: FakeClock,
    registry: CollectorRegistry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "100000")
    ex = make_executor()
    bad = CgroupUpdate("cpu.cfs_quota_us", POD, "-2", "x")
    with caplog.at_level("WARNING", logger="koordlet.resourceexecutor"):
        for _ in range(3):
            assert not ex.update(bad).ok
        fake_clock.advance(61)
        assert not ex.update(bad).ok
    assert len(caplog.records) == 2  # the first, and again a force period later
    assert errors(registry, "cpu.cfs_quota_us", "invalid") == 4  # every refusal is counted


def test_unsafe_dir_is_refused(
    make_executor: Callable[..., ResourceExecutor], writer: RecordingWriter
) -> None:
    ex = make_executor()
    res = ex.update(quota("50000", cgroup_dir="../../etc"))
    assert res.error and writer.writes == []


@pytest.mark.parametrize(
    ("err", "kind"), [(errno.EINVAL, "einval"), (errno.EBUSY, "ebusy"), (errno.EACCES, "eacces")]
)
def test_kernel_errors_are_reported_with_path_and_value(
    fake_host: Any,
    make_executor: Callable[..., ResourceExecutor],
    writer: RecordingWriter,
    registry: CollectorRegistry,
    err: int,
    kind: str,
) -> None:
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "-1")
    writer.fail["cpu.cfs_quota_us"] = err
    ex = make_executor()
    res = ex.update(quota("50000"))
    assert not res.written
    assert "'50000'" in res.error
    assert f"{POD}/cpu.cfs_quota_us" in res.error
    assert f"errno {err}" in res.error
    assert errors(registry, "cpu.cfs_quota_us", kind) == 1
    assert fake_host.read_cgroup("cpu.cfs_quota_us", POD) == "-1"
    # a failed write is not cached: the next update tries again
    writer.fail.clear()
    assert ex.update(quota("50000")).written


def test_gone_cgroups_are_skipped_while_the_rest_applies(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], registry: CollectorRegistry
) -> None:
    dirs = ["kubepods/besteffort/pod1", "kubepods/besteffort/pod2", "kubepods/besteffort/pod3"]
    for d in (dirs[0], dirs[2]):
        fake_host.write_cgroup("cpu.cfs_quota_us", d, "-1")
    ex = make_executor()
    results = ex.update_batch([quota("40000", cgroup_dir=d) for d in dirs])
    assert [(r.written, r.skipped, r.error) for r in results] == [
        (True, "", ""),
        (False, "gone", ""),
        (True, "", ""),
    ]
    assert fake_host.read_cgroup("cpu.cfs_quota_us", dirs[2]) == "40000"
    assert errors(registry, "cpu.cfs_quota_us", "gone") == 1


def test_cgroup_removed_after_caching_is_dropped_from_the_cache(
    fake_host: Any,
    make_executor: Callable[..., ResourceExecutor],
    fake_clock: FakeClock,
    writer: RecordingWriter,
) -> None:
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "-1")
    ex = make_executor()
    assert ex.update(quota("50000")).written
    writer.fail["cpu.cfs_quota_us"] = errno.ENODEV  # removed between our read and our write
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "-1")
    fake_clock.advance(61)
    assert [r.skipped for r in ex.reconcile_owned()] == ["gone"]
    # the pod's cgroup is back (same path, kernel default): a cache entry left behind would skip this
    del writer.fail["cpu.cfs_quota_us"]
    assert ex.update(quota("50000")).written


def test_audit_log_records_changes_and_is_bounded(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], fake_clock: FakeClock
) -> None:
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "-1")
    ex = make_executor(audit_size=3)
    for q in ("10000", "20000", "30000", "40000"):
        fake_clock.advance(1)
        ex.update(quota(q))
    ex.update(quota("40000"))  # unchanged: no event
    events = ex.events()
    assert [e["seq"] for e in events] == [2, 3, 4]
    assert [(e["before"], e["after"]) for e in events] == [
        ("10000", "20000"),
        ("20000", "30000"),
        ("30000", "40000"),
    ]
    last = events[-1]
    assert last["owner"] == "BECPUSuppress" and last["reason"] == "test"
    assert str(last["path"]).endswith(f"cpu/{POD}/cpu.cfs_quota_us")
    assert last["time"] == fake_clock.wall()
    assert ex.events(since_seq=3) == [last]
    assert ex.events(limit=1) == [last]


def test_dry_run_writes_nothing(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], writer: RecordingWriter
) -> None:
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "-1")
    ex = make_executor(dry_run=True)
    res = ex.update(quota("50000"))
    assert (res.written, res.skipped) == (False, "dry-run")
    assert writer.writes == [] and ex.events() == []
    assert fake_host.read_cgroup("cpu.cfs_quota_us", POD) == "-1"


def test_tasks_only_appends_missing_ids(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], writer: RecordingWriter
) -> None:
    fake_host.write_cgroup("tasks", POD, "10\n11")
    ex = make_executor()
    assert ex.update(CgroupUpdate("tasks", POD, "11", "x", cacheable=False)).skipped == "unchanged"
    assert ex.update(CgroupUpdate("tasks", POD, "12", "x", cacheable=False)).written
    assert [v for _, v in writer.writes] == ["12"]
    writer.fail["tasks"] = errno.ESRCH  # the thread exited before it could be moved
    assert ex.update(CgroupUpdate("tasks", POD, "13", "x", cacheable=False)).skipped == "gone"


def test_unsupported_resource_is_skipped(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], registry: CollectorRegistry
) -> None:
    fake_host.use_cgroup_v2()
    ex = make_executor()
    res = ex.update(CgroupUpdate("blkio.weight", POD, "100", "x"))
    assert (res.written, res.skipped, res.error) == (False, "unsupported", "")
    assert errors(registry, "blkio.weight", "unsupported") == 1


def test_v2_quota_keeps_the_period_and_unlimited_is_max(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], writer: RecordingWriter
) -> None:
    fake_host.use_cgroup_v2()
    fake_host.mkcgroup(None, POD)
    fake_host.write(f"cgroup/{POD}/cpu.max", "max 50000\n")
    ex = make_executor()
    assert ex.mode is CgroupMode.V2
    assert ex.update(quota("20000")).written
    assert fake_host.read(f"cgroup/{POD}/cpu.max") == "20000 50000"
    assert ex.update(quota("20000")).skipped == "unchanged"
    assert ex.update(quota("-1")).written
    assert fake_host.read(f"cgroup/{POD}/cpu.max") == "max 50000"
    # quota and period share cpu.max but are cached apart
    assert ex.update(CgroupUpdate("cpu.cfs_period_us", POD, "100000", "x")).written
    assert fake_host.read(f"cgroup/{POD}/cpu.max") == "max 100000"
    assert ex.update(quota("-1")).skipped == "unchanged"
    assert len(writer.writes) == 3


def test_metrics_histogram_by_type_and_status(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], registry: CollectorRegistry
) -> None:
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "-1")
    ex = make_executor()
    ex.update(quota("50000"))
    ex.update(quota("50000"))
    ex.update(quota("-5"))

    def count(status: str) -> float | None:
        return registry.get_sample_value(
            "koordlet_resource_update_duration_milliseconds_count",
            {"type": "cpu.cfs_quota_us", "status": status},
        )

    assert (count("written"), count("unchanged"), count("error")) == (1.0, 1.0, 1.0)


@pytest.mark.parametrize("mode", [CgroupMode.V1, CgroupMode.V2])
def test_cpuset_batch_on_both_layouts(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], writer: RecordingWriter, mode: CgroupMode
) -> None:
    if mode is CgroupMode.V2:
        fake_host.use_cgroup_v2()
    pods = [f"kubepods/besteffort/pod{i}" for i in range(3)]
    for d in pods[:2]:
        fake_host.mkcgroup("cpuset", d)
        fake_host.write_cgroup("cpuset.cpus", d, "0-3")
    ex = make_executor()
    assert ex.mode is mode
    results = ex.update_batch([CgroupUpdate("cpuset.cpus", d, "1,2", "CPUSuppress") for d in pods])
    assert [(r.written, r.skipped) for r in results] == [(True, ""), (True, ""), (False, "gone")]
    for d in pods[:2]:
        assert fake_host.read_cgroup("cpuset.cpus", d) == "1-2"
    again = ex.update_batch([CgroupUpdate("cpuset.cpus", d, "2,1", "CPUSuppress") for d in pods[:2]])
    assert [r.skipped for r in again] == ["unchanged", "unchanged"]
    assert len(writer.writes) == 2


def test_online_cpus_are_read_only_for_cpu_lists(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Other values never need the online CPUs; reading sysfs for each of them cost a read per update."""
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "-1")
    fake_host.write_cgroup("cpuset.cpus", POD, "0-3")
    ex = make_executor()
    reads: list[int] = []
    real = ex._online

    def counting_online() -> frozenset[int] | None:
        reads.append(1)
        return real()

    monkeypatch.setattr(ex, "_online", counting_online)
    assert ex.update(quota("50000")).written
    assert ex.update_batch([quota("60000"), CgroupUpdate("cpu.shares", POD, "2", "x")])[0].written
    assert ex.leveled_update([[], [quota("70000")], []])[0].written
    assert reads == []
    # a cpu list is still checked against them: an offline CPU is refused before any write
    refused = ex.update(CgroupUpdate("cpuset.cpus", POD, "0-7", "x"))
    assert refused.error and reads == [1]
    assert fake_host.read_cgroup("cpuset.cpus", POD) == "0-3"
    assert ex.leveled_update([[], [CgroupUpdate("cpuset.cpus", POD, "1", "x")], []])[0].ok and reads == [1, 1]


def test_an_uncached_write_by_another_owner_drops_the_cache_entry(
    fake_host: Any, make_executor: Callable[..., ResourceExecutor]
) -> None:
    """One plugin caches its quota; another restores the file without caching (BECPUSuppress's restore).
    The first one's next identical value must be written, not skipped as unchanged (the file held -1)."""
    fake_host.write_cgroup("cpu.cfs_quota_us", POD, "-1")
    ex = make_executor()
    assert ex.update(quota("50000", owner="BEQuotaCap")).written
    assert ex.update(quota("-1", cacheable=False)).written
    assert ex.update(quota("50000", owner="BEQuotaCap")).written
    assert fake_host.read_cgroup("cpu.cfs_quota_us", POD) == "50000"
