"""BEResourceCollector: node_be usage / real-limit / request in millicores, v1 and v2."""

from __future__ import annotations

from typing import Any

import pytest

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.beresource import BEResourceCollector, BEResourceConfig
from koordlet.system.batchread import BatchReader
from koordlet.system.cgroups import CgroupMode
from koordlet.testing import FakeClock, FakeStates, container_id, make_pod, pod_uid
from tests.support.recording import RecordingErrors
from tests.unit.koordlet.metricsadvisor.conftest import make_host

TIER = "kubepods/besteffort"


def set_tier(fh: Any, *, cpu_ns: int, quota: int, period: int = 100000, cpus: str = "0-3") -> None:
    if fh.mode is CgroupMode.V2:
        fh.write_cgroup("cpu.stat", TIER, f"usage_usec {cpu_ns // 1000}\nnr_periods 0\nnr_throttled 0\n")
        fh.write_cgroup("cpu.cfs_quota_us", TIER, f"{'max' if quota < 0 else quota} {period}")
    else:
        fh.write_cgroup("cpuacct.usage", TIER, str(cpu_ns))
        fh.write_cgroup("cpu.cfs_quota_us", TIER, str(quota))
        fh.write_cgroup("cpu.cfs_period_us", TIER, str(period))
    fh.write_cgroup("cpuset.cpus", TIER, cpus)


def node_be(cache: MetricCache) -> dict[str, float]:
    return {labels["be_allocation"]: v for labels, _t, v in cache.latest(api.NODE_BE)}


def make(
    fh: Any,
    cache: MetricCache,
    states: FakeStates,
    clock: FakeClock,
    errors: RecordingErrors,
    shared: fw.SharedState | None = None,
) -> BEResourceCollector:
    return BEResourceCollector(
        BEResourceConfig(1.0),
        fw.Options(
            cache=cache,
            clock=clock,
            errors=errors,
            host=make_host(fh),
            states=states,
            shared=shared or fw.SharedState(),
        ),
    )


def test_usage_limit_and_request_by_hand(
    host_tree: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fh = host_tree
    be1 = make_pod(
        "pod-1", uid=pod_uid(1), container_ids=[container_id(1), container_id(2)], batch_cpu_request_milli=500
    )
    be2 = make_pod("pod-2", uid=pod_uid(2), container_ids=[container_id(3)], batch_cpu_request_milli=250)
    ls = make_pod(
        "pod-3",
        kube_qos=api.KubeQOSClass.BURSTABLE,
        uid=pod_uid(3),
        container_ids=[container_id(4)],
        batch_cpu_request_milli=9999,
    )
    for p in (be1, be2):
        fh.pod_cgroup(p.uid)
        for c in p.containers:
            cdir = fh.container_cgroup(p.uid, "containerd://" + c.container_id)
            fh.write_cgroup("cpuset.cpus", cdir, "0-3")
    # the tightest BE container cpuset bounds the tier: 2 CPUs
    fh.write_cgroup("cpuset.cpus", f"{TIER}/pod{be2.uid}/{container_id(3)}", "1-2")
    set_tier(fh, cpu_ns=10_000_000_000, quota=300000, period=100000)
    col = make(fh, cache, FakeStates(pods=[be1, be2, ls]), fake_clock, errors)
    col.collect()
    got = node_be(cache)
    assert "usage" not in got  # baseline round
    assert got["request"] == 500 * 2 + 250  # batch-cpu of BE pods only
    assert got["real-limit"] == 2000.0  # min(2 cpus x 1000, 300000 x 1000 / 100000 = 3000)
    fake_clock.advance(2.0)
    set_tier(fh, cpu_ns=11_500_000_000, quota=150000, cpus="0-3")
    col.collect()
    got = node_be(cache)
    assert got["usage"] == pytest.approx(750.0)  # 1.5 s of CPU over 2 s
    assert got["real-limit"] == 1500.0  # quota now tighter than the 2-CPU container cpuset
    assert col.has_synced()
    assert not errors.counts


def test_unlimited_quota_leaves_the_cpuset(
    host_tree: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    set_tier(host_tree, cpu_ns=0, quota=-1, cpus="0-5")
    make(host_tree, cache, FakeStates(), fake_clock, errors).collect()
    assert node_be(cache)["real-limit"] == 6000.0
    assert node_be(cache)["request"] == 0.0


def test_usage_counter_reset_gives_no_usage(
    host_tree: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    set_tier(host_tree, cpu_ns=5_000_000_000, quota=-1)
    col = make(host_tree, cache, FakeStates(), fake_clock, errors)
    col.collect()
    fake_clock.advance(1.0)
    set_tier(host_tree, cpu_ns=1000, quota=-1)
    col.collect()
    assert "usage" not in node_be(cache)
    assert errors.kind(fw.ERR_COUNTER_RESET) == 1


def test_no_tier_falls_back_to_cpu_count_and_still_syncs(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    shared = fw.SharedState()
    shared.set(fw.CPU_COUNT, fake_clock(), 2.0)
    col = make(fake_host, cache, FakeStates(), fake_clock, errors, shared)
    col.collect()
    assert node_be(cache) == {"request": 0.0, "real-limit": 2000.0}
    assert col.has_synced()


def test_garbage_quota_is_counted(
    host_tree: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    set_tier(host_tree, cpu_ns=0, quota=-1)
    if host_tree.mode is CgroupMode.V2:
        host_tree.write_cgroup("cpu.cfs_quota_us", TIER, "nonsense")
    else:
        host_tree.write_cgroup("cpu.cfs_quota_us", TIER, "nonsense")
    make(host_tree, cache, FakeStates(), fake_clock, errors).collect()
    assert errors.kind(fw.ERR_MALFORMED) == 1
    assert "real-limit" not in node_be(cache)


def test_a_be_pod_coming_and_going_keeps_the_cpuset_reader(
    host_tree: Any,
    cache: MetricCache,
    fake_clock: FakeClock,
    errors: RecordingErrors,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every change of the pod list built a new reader over every BE container's cpuset (opening them all
    again); it now follows the containers that came and went, and bounds the tier as a fresh one would."""
    from koordlet.system import native

    fh = host_tree
    pods = [make_pod(f"pod-{i}", uid=pod_uid(60 + i), container_ids=[container_id(60 + i)]) for i in range(4)]
    for p in pods:
        fh.pod_cgroup(p.uid)
        fh.write_cgroup(
            "cpuset.cpus", fh.container_cgroup(p.uid, "containerd://" + p.containers[0].container_id), "0-3"
        )
    fh.write_cgroup("cpuset.cpus", f"{TIER}/pod{pods[3].uid}/{container_id(63)}", "2")
    set_tier(fh, cpu_ns=0, quota=-1)
    states = FakeStates(pods=pods[:3])
    col = make(fh, cache, states, fake_clock, errors)
    col.collect()
    assert node_be(cache)["real-limit"] == 4000.0
    built: list[int] = []
    real = native.open_batch_reader

    def counting_open(*a: Any, **kw: Any) -> BatchReader:
        built.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(native, "open_batch_reader", counting_open)
    states.pod_list = [pods[1], pods[2], pods[3]]  # pod 0 goes, pod 3 (one CPU) comes
    fake_clock.advance(1.0)
    col.collect()
    assert built == []
    assert node_be(cache)["real-limit"] == 1000.0
    states.pod_list = [pods[1]]
    fake_clock.advance(1.0)
    col.collect()
    assert built == [] and node_be(cache)["real-limit"] == 4000.0
