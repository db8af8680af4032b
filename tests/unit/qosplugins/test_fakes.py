"""The fakes themselves: windows and aggregations, v1 cpuset ordering refusals, dry-run, the harness."""

from __future__ import annotations

import pytest

from koordlet import api
from koordlet.testing import FakeClock, FakeExecutor, FakeHostReader, FakeMetrics, make_harness, topology


def test_metrics_honour_window_aggregation_and_label_subsets() -> None:
    clock = FakeClock()
    m = FakeMetrics(clock)
    for i, v in enumerate([1.0, 2.0, 3.0, 10.0]):
        m.set(api.POD_CPU_USAGE, v, {"pod_uid": "a", "extra": "x"}, at=clock() - 3 + i)
    m.set(api.POD_CPU_USAGE, 100.0, {"pod_uid": "b"})
    last = m.query(api.POD_CPU_USAGE, window=10, labels={"pod_uid": "a"})
    assert last is not None and last.value == 10.0 and last.count == 4 and last.duration == 3.0
    avg = m.query(api.POD_CPU_USAGE, window=1.5, agg="avg", labels={"pod_uid": "a"})
    assert avg is not None and avg.value == (3.0 + 10.0) / 2  # samples at now-1 and now
    p50 = m.query(api.POD_CPU_USAGE, window=10, agg="p50", labels={"pod_uid": "a"})
    assert p50 is not None and p50.value == 2.0  # lower nearest rank: int(4 * 0.5) - 1 = index 1
    assert m.query(api.POD_CPU_USAGE, window=10, labels={"pod_uid": "c"}) is None
    clock.advance(20)
    assert m.query(api.POD_CPU_USAGE, window=10, labels={"pod_uid": "a"}) is None


def tree(host: FakeHostReader) -> list[list[api.CgroupUpdate]]:
    host.add_cgroup("be", cpuset_cpus="0-3")
    host.add_cgroup("be/pod", cpuset_cpus="0-3")
    host.add_cgroup("be/pod/c", cpuset_cpus="0-3")
    return [[api.CgroupUpdate("cpuset.cpus", d, "0-1", owner="t")] for d in ("be", "be/pod", "be/pod/c")]


def test_v1_cpuset_shrink_parent_first_is_refused_with_ebusy() -> None:
    host = FakeHostReader(1, topology(cores=4))
    ex = FakeExecutor(host)
    levels = tree(host)
    results = ex.update_batch([u for level in levels for u in level])  # naive top-down shrink
    assert "EBUSY" in results[0].error
    assert api.parse_cpuset(host.read("cpuset.cpus", "be") or "") == {0, 1, 2, 3}


def test_v1_cpuset_grow_child_first_is_refused_with_eacces() -> None:
    host = FakeHostReader(1, topology(cores=4))
    ex = FakeExecutor(host)
    tree(host)
    for d in ("be", "be/pod", "be/pod/c"):
        host.values[("cpuset.cpus", d)] = "0-1"
    result = ex.update(api.CgroupUpdate("cpuset.cpus", "be/pod/c", "0-3", owner="t"))
    assert "EACCES" in result.error


@pytest.mark.parametrize("target", ["0-1", "2-3", "0-3"])
def test_leveled_update_reaches_any_target_without_errors(target: str) -> None:
    host = FakeHostReader(1, topology(cores=4))
    ex = FakeExecutor(host)
    tree(host)
    for d in ("be", "be/pod", "be/pod/c"):
        host.values[("cpuset.cpus", d)] = "0-1"
    levels = [[api.CgroupUpdate("cpuset.cpus", d, target, owner="t")] for d in ("be", "be/pod", "be/pod/c")]
    ex.leveled_update(levels)
    assert ex.errors == []
    assert all(host.read("cpuset.cpus", d) == host.read("cpuset.cpus", "be") for d in ("be/pod", "be/pod/c"))
    assert api.parse_cpuset(host.read("cpuset.cpus", "be/pod/c") or "") == api.parse_cpuset(target)


def test_executor_refuses_what_the_kernel_refuses_and_dry_run_writes_nothing() -> None:
    host = FakeHostReader(1, topology(cores=2))
    host.add_cgroup("be", cpu_cfs_quota_us="-1", cpuset_cpus="0-1")
    ex = FakeExecutor(host)
    assert not ex.update(api.CgroupUpdate("cpu.cfs_quota_us", "be", "500", owner="t")).ok
    assert not ex.update(api.CgroupUpdate("cpuset.cpus", "be", "0-7", owner="t")).ok
    dry = FakeExecutor(host, dry_run=True)
    result = dry.update(api.CgroupUpdate("cpu.cfs_quota_us", "be", "5000", owner="t"))
    assert result.skipped == "dry-run" and host.read("cpu.cfs_quota_us", "be") == "-1"
    assert len(dry.updates) == 1


def test_v2_host_reads_quota_back_as_the_agent_does() -> None:
    # The agent's host reader turns v2 cpu.max into the v1 value; the fake shows the same (the contract
    # suite in tests/unit/koordlet/api/test_host_reader.py holds the two together).
    h = make_harness(2)
    h.executor.update(api.CgroupUpdate("cpu.cfs_quota_us", "kubepods/besteffort", "20000", owner="t"))
    assert h.host.read("cpu.cfs_quota_us", "kubepods/besteffort") == "20000"
    h.executor.update(api.CgroupUpdate("cpu.cfs_quota_us", "kubepods/besteffort", "-1", owner="t"))
    assert h.host.read("cpu.cfs_quota_us", "kubepods/besteffort") == "-1"


def test_list_cgroups_depth_and_order() -> None:
    host = FakeHostReader()
    host.add_cgroup("a/b/c/d")
    assert list(host.list_cgroups("a", 2)) == ["a", "a/b", "a/b/c"]
    assert list(host.list_cgroups("missing", 2)) == []


def test_fake_write_kinds_beyond_cgroups() -> None:
    import ipaddress

    from koordlet import api
    from koordlet.testing import FakeExecutor, FakeHostReader

    host = FakeHostReader()
    ex = FakeExecutor(host)
    ex.sysctls["watermark_scale_factor"] = "10"
    assert ex.update_sysctl("watermark_scale_factor", "150", owner="p").written
    assert ex.update_sysctl("memcg_reap_background", "1", owner="p").skipped == "unsupported"
    assert [r.written for r in ex.restore_sysctl("p")] == [True]
    assert ex.sysctls == {"watermark_scale_factor": "10"}
    # resctrl: none on the fake host until a test says so
    assert ex.ensure_resctrl_group("BE", owner="p").skipped == "unsupported"
    host.resctrl_why = None
    assert ex.ensure_resctrl_group("BE", owner="p").written
    assert ex.update_resctrl(api.ResctrlUpdate("BE", "p", (0, 30), 50)).written
    assert ex.move_resctrl_tasks("BE", [3, 1], owner="p").written
    assert ex.move_resctrl_tasks("BE", [1], owner="p").skipped == "unchanged"
    assert ex.resctrl_tasks == {"BE": {1, 3}}
    assert ex.remove_resctrl_group("BE", owner="p").written and ex.resctrl_groups == {}
    spec = api.NetQoSSpec(
        "eth0",
        egress=api.DirectionSpec(10**9, api.ClassLimit(10**8, 10**9), api.ClassLimit(10**7, 10**8)),
        be_ips=frozenset({ipaddress.ip_address("10.0.0.9")}),
    )
    assert ex.apply_network_qos(spec, owner="p").written
    assert ex.apply_network_qos(spec, owner="p").skipped == "unchanged"
    bad = api.NetQoSSpec("eth0", egress=api.DirectionSpec(10**9, api.ClassLimit(1, 1), api.ClassLimit(1, 1)))
    assert "rate" in ex.apply_network_qos(bad, owner="p").error
    assert ex.remove_network_qos("eth0", owner="p").written and ex.network_qos == {}
