"""CPUBurst: cfs burst values, quota scaling with node state and token bucket, reset and shutdown."""

from __future__ import annotations

import dataclasses
import json

import pytest

from koordlet import api
from koordlet.testing import Harness, make_harness, make_pod, topology
from qosplugins.cpuburst import CPUBurst


def harness(version: int = 1, **strategy: object) -> Harness:
    slo = api.NodeSLO(cpu_burst_strategy=api.CPUBurstStrategy(**strategy))  # type: ignore[arg-type]
    return make_harness(version, topology(cores=8), slo=slo)


def started(h: Harness) -> CPUBurst:
    plugin = CPUBurst()
    h.start(plugin)
    return plugin


def ls_pod(h: Harness, limit: int = 1000, quota: int = 100_000, **kw: object) -> api.PodInfo:
    return h.add_pod(make_pod("ls", api.QOSClass.LS, cpu_limit_milli=limit, **kw), quota=quota)  # type: ignore[arg-type]


def throttled(h: Harness, pod: api.PodInfo, ratio: float = 0.3, usage: float = 1.0) -> None:
    c = pod.containers[0]
    h.metrics.set(api.CONTAINER_CPU_THROTTLED, ratio, {"container_id": c.container_id})
    h.metrics.set(api.CONTAINER_CPU_USAGE, usage, {"container_id": c.container_id})


def quota(h: Harness, d: str) -> str | None:
    return h.host.read("cpu.cfs_quota_us", d)


@pytest.mark.parametrize("version", [1, 2])
def test_cpu_burst_only_sets_burst_capped_at_quota(version: int) -> None:
    h = harness(version, policy="cpuBurstOnly", cpu_burst_percent=50)
    pod = ls_pod(h, limit=2000, quota=200_000)
    plugin = started(h)
    plugin.reconcile()
    # 2000m limit * 50% = 1 core = 100000 us; the pod gets the sum of its containers
    c = pod.containers[0].cgroup_dir
    assert h.host.read("cpu.cfs_burst_us", c) == "100000"
    assert h.host.read("cpu.cfs_burst_us", pod.cgroup_dir) == "100000"
    h.states.slo = api.NodeSLO(cpu_burst_strategy=api.CPUBurstStrategy(policy="cpuBurstOnly"))
    plugin.reconcile()
    # default 1000% -> 2000000 us, but the kernel refuses burst > quota: capped at 200000
    assert h.host.read("cpu.cfs_burst_us", c) == "200000"
    h.states.slo = api.NodeSLO()  # policy none: burst taken back
    plugin.reconcile()
    assert h.host.read("cpu.cfs_burst_us", c) == "0"
    assert h.host.read("cpu.cfs_burst_us", pod.cgroup_dir) == "0"


def test_lsr_lse_be_and_unlimited_pods_are_untouched() -> None:
    h = harness(policy="auto")
    for qos in (api.QOSClass.LSR, api.QOSClass.LSE, api.QOSClass.BE):
        p = h.add_pod(make_pod(qos.value, qos, cpu_limit_milli=1000), quota=100_000)
        throttled(h, p)
    unlimited = h.add_pod(make_pod("nolimit", api.QOSClass.LS))
    throttled(h, unlimited)
    h.metrics.set(api.NODE_CPU_USAGE, 1.0)
    started(h).reconcile()
    assert h.executor.updates == []


def test_unlabelled_guaranteed_pod_gets_its_burst() -> None:
    """Koordinator's ``IsPodCPUBurstable`` reads the raw label. A Guaranteed pod without
    ``koordinator.sh/qosClass`` defaults to LSR for everything else, but its burst is not skipped."""
    h = harness(policy="cpuBurstOnly", cpu_burst_percent=50)
    pod = h.add_pod(
        make_pod("guaranteed", kube_qos=api.KubeQOSClass.GUARANTEED, cpu_limit_milli=2000), quota=200_000
    )
    assert pod.qos is api.QOSClass.LSR and pod.qos_raw is api.QOSClass.NONE
    started(h).reconcile()
    assert h.host.read("cpu.cfs_burst_us", pod.containers[0].cgroup_dir) == "100000"  # 2 cores * 50 %


@pytest.mark.parametrize("version", [1, 2])
def test_throttled_container_quota_grows_to_ceiling_pod_first(version: int) -> None:
    h = harness(version, policy="cfsQuotaBurstOnly")
    pod = ls_pod(h)
    c = pod.containers[0].cgroup_dir
    plugin = started(h)
    seen = []
    for _ in range(8):
        h.metrics.set(api.NODE_CPU_USAGE, 1.0)  # 1 of 8 cores: idle share pool
        throttled(h, pod)
        plugin.reconcile()
        seen.append(quota(h, c))
        h.clock.advance(1)
    # base 100000, ceiling 300% = 300000; *1.2 per tick (truncated): 120000, 144000, ... 298598, then 300000
    expected = [120000, 144000, 172800, 207360, 248832, 298598, 300000, 300000]
    assert seen == [str(q) for q in expected]
    assert quota(h, pod.cgroup_dir) == str(300000)  # pod moved by the same deltas
    first = [u.cgroup_dir for u in h.executor.updates if u.resource == "cpu.cfs_quota_us"][:2]
    assert first == [pod.cgroup_dir, c]  # growth: parent before child (v1 refuses child > parent)


def test_overload_scales_down_and_cooling_blocks_growth() -> None:
    h = harness(policy="cfsQuotaBurstOnly")
    pod = ls_pod(h, quota=100_000)
    c = pod.containers[0].cgroup_dir
    h.host.values[("cpu.cfs_quota_us", c)] = "200000"
    h.host.values[("cpu.cfs_quota_us", pod.cgroup_dir)] = "200000"
    plugin = started(h)
    h.metrics.set(api.NODE_CPU_USAGE, 3.7)  # 3.7/8 = 46% >= 0.9 * 50%: cooling
    throttled(h, pod)
    plugin.reconcile()
    assert quota(h, c) == "200000"
    h.clock.advance(1)
    h.metrics.set(api.NODE_CPU_USAGE, 6.0)  # 75% >= 50%: overload
    throttled(h, pod)
    plugin.reconcile()
    # 200000 * 0.8 = 160000; container shrinks before its pod
    assert quota(h, c) == "160000"
    assert quota(h, pod.cgroup_dir) == "160000"
    last = [u.cgroup_dir for u in h.executor.updates if u.resource == "cpu.cfs_quota_us"][-2:]
    assert last == [c, pod.cgroup_dir]


def test_empty_token_bucket_scales_down() -> None:
    h = harness(policy="cfsQuotaBurstOnly", cfs_quota_burst_period_seconds=0)
    pod = ls_pod(h)
    c = pod.containers[0].cgroup_dir
    h.host.values[("cpu.cfs_quota_us", c)] = "150000"
    plugin = started(h)
    h.metrics.set(api.NODE_CPU_USAGE, 1.0)
    throttled(h, pod)
    plugin.reconcile()
    # period 0 -> bucket capacity 0 -> no tokens -> scale down: max(150000 * 0.8, base) = 120000
    assert quota(h, c) == "120000"


def test_quota_ceiling_never_above_node_capacity() -> None:
    h = make_harness(
        1, topology(cores=2), slo=api.NodeSLO(cpu_burst_strategy=api.CPUBurstStrategy(policy="auto"))
    )
    pod = ls_pod(h, limit=1000, quota=100_000)
    c = pod.containers[0].cgroup_dir
    plugin = started(h)
    for _ in range(10):
        h.metrics.set(api.NODE_CPU_USAGE, 0.1)
        throttled(h, pod)
        plugin.reconcile()
        h.clock.advance(1)
    # ceiling min(300% of 100000, 2 cores = 200000) = 200000
    assert quota(h, c) == "200000"


def test_policy_off_and_shutdown_reset_scaled_quotas() -> None:
    h = harness(policy="cfsQuotaBurstOnly")
    pod = ls_pod(h)
    c = pod.containers[0].cgroup_dir
    plugin = started(h)
    for _ in range(2):
        h.metrics.set(api.NODE_CPU_USAGE, 1.0)
        throttled(h, pod)
        plugin.reconcile()
        h.clock.advance(1)
    assert quota(h, c) == "144000"
    plugin.shutdown()
    assert quota(h, c) == "100000"
    assert quota(h, pod.cgroup_dir) == "100000"
    assert h.executor.released == ["CPUBurst"]
    h.host.values[("cpu.cfs_quota_us", c)] = "150000"
    h.states.slo = api.NodeSLO()
    plugin.reconcile()
    assert quota(h, c) == "100000"


def test_pod_annotation_overrides_node_policy() -> None:
    h = harness(policy="none")
    note = {"koordinator.sh/cpuBurst": json.dumps({"policy": "cpuBurstOnly", "cpuBurstPercent": 20})}
    pod = ls_pod(h, limit=1000, annotations=note)
    bad = h.add_pod(
        make_pod("bad", api.QOSClass.LS, cpu_limit_milli=1000, annotations={"koordinator.sh/cpuBurst": "[1]"})
    )
    plugin = started(h)
    plugin.reconcile()
    # 1000m * 20% = 20000 us
    assert h.host.read("cpu.cfs_burst_us", pod.containers[0].cgroup_dir) == "20000"
    assert h.host.read("cpu.cfs_burst_us", bad.containers[0].cgroup_dir) == "0"
    floaty = {"koordinator.sh/cpuBurst": json.dumps({"policy": "cpuBurstOnly", "cpuBurstPercent": 12.5})}
    odd = h.add_pod(make_pod("odd", api.QOSClass.LS, cpu_limit_milli=1000, annotations=floaty))
    plugin.reconcile()
    assert h.host.read("cpu.cfs_burst_us", odd.containers[0].cgroup_dir) == "0"
    assert all(u.value.lstrip("-").isdigit() for u in h.executor.updates)


def test_gauge_and_schedule() -> None:
    h = harness(policy="cfsQuotaBurstOnly")
    h.agent = api.AgentOptions(reconcile_interval=5.0)
    pod = ls_pod(h)
    plugin = started(h)
    assert [i for i, _ in h.scheduled] == [5.0]
    h.metrics.set(api.NODE_CPU_USAGE, 1.0)
    throttled(h, pod)
    plugin.reconcile()
    c = pod.containers[0]
    labels = {
        "node": "node-1",
        "pod_namespace": "default",
        "pod_name": "ls",
        "container_id": c.container_id,
        "container_name": c.name,
    }
    assert h.registry.get_sample_value("koordlet_container_scaled_cfs_quota_us", labels) == 120000


def test_one_unreadable_container_does_not_stop_the_others() -> None:
    h = harness(policy="cfsQuotaBurstOnly")
    odd = ls_pod(h)
    fine = ls_pod(h)
    h.host.broken.add(("cpu.cfs_quota_us", odd.containers[0].cgroup_dir))
    h.metrics.set(api.NODE_CPU_USAGE, 1.0)
    throttled(h, odd)
    throttled(h, fine)
    started(h).reconcile()
    assert quota(h, fine.containers[0].cgroup_dir) == "120000"
    assert h.executor.values_written("cpu.cfs_quota_us", odd.containers[0].cgroup_dir) == []


def test_unknown_node_state_holds_growth() -> None:
    h = harness(policy="cfsQuotaBurstOnly")
    pod = ls_pod(h)
    throttled(h, pod)  # throttled, but no node CPU sample: the share pool state is unknown
    started(h).reconcile()
    assert quota(h, pod.containers[0].cgroup_dir) == "100000"
    assert h.executor.updates == []


def test_reset_never_raises_a_quota_kubelet_set_below_base() -> None:
    h = harness(policy="none")
    pod = ls_pod(h, limit=1000, quota=50_000)  # e.g. kubelet with a 50 ms CFS period
    started(h).reconcile()
    assert quota(h, pod.containers[0].cgroup_dir) == "50000"
    assert h.executor.updates == []


def test_a_pod_whose_burst_took_is_not_sent_again_until_it_or_the_strategy_changes() -> None:
    """Every pod's unchanged burst values went to the executor every second. A pod and config
    whose values the executor took whole are skipped; a change of either sends them, and so does a write
    that did not take (the container's cgroup not there yet)."""
    h = harness(policy="cpuBurstOnly", cpu_burst_percent=50)
    pod = ls_pod(h, limit=2000, quota=200_000)
    plugin = started(h)
    plugin.reconcile()
    c = pod.containers[0].cgroup_dir
    assert h.host.read("cpu.cfs_burst_us", c) == "100000"
    sent = len(h.executor.updates) + len(h.executor.unchanged)
    for _ in range(3):
        plugin.reconcile()
    assert len(h.executor.updates) + len(h.executor.unchanged) == sent
    # the strategy changes: sent again at once
    h.states.slo = api.NodeSLO(
        cpu_burst_strategy=api.CPUBurstStrategy(policy="cpuBurstOnly", cpu_burst_percent=20)
    )
    plugin.reconcile()
    assert h.host.read("cpu.cfs_burst_us", c) == "40000"
    # the pod changes (a new limit): sent again at once
    bigger = dataclasses.replace(
        pod, containers=(dataclasses.replace(pod.containers[0], cpu_limit_milli=4000),)
    )
    h.states.pod_list[:] = [bigger]
    plugin.reconcile()
    assert h.host.read("cpu.cfs_burst_us", c) == "80000"
    # a new pod whose container cgroup is not there yet: gone, so tried again on every round
    late = make_pod("late", api.QOSClass.LS, cpu_limit_milli=1000)
    h.states.pod_list.append(late)
    h.host.add_cgroup(late.cgroup_dir, cpu_cfs_quota_us="100000", cpu_cfs_burst_us="0")
    plugin.reconcile()
    late_dir = late.containers[0].cgroup_dir
    assert h.host.read("cpu.cfs_burst_us", late_dir) is None
    h.host.add_cgroup(late_dir, cpu_cfs_quota_us="100000", cpu_cfs_burst_us="0")
    plugin.reconcile()
    assert h.host.read("cpu.cfs_burst_us", late_dir) == "20000"
    # a refused write is not remembered either
    h.executor.fail[("cpu.cfs_burst_us", pod.cgroup_dir)] = "EINVAL"
    h.states.slo = api.NodeSLO(
        cpu_burst_strategy=api.CPUBurstStrategy(policy="cpuBurstOnly", cpu_burst_percent=30)
    )
    plugin.reconcile()
    del h.executor.fail[("cpu.cfs_burst_us", pod.cgroup_dir)]
    plugin.reconcile()
    assert h.host.read("cpu.cfs_burst_us", pod.cgroup_dir) == "120000"


def test_the_node_state_is_not_measured_while_no_container_has_a_quota_to_scale() -> None:
    """The node state asked the metric cache about the node and every BE pod each second, whether or not
    any container had a quota to scale (a thousand queries a second on a dense node of pods without
    CPU limits). It is measured once a container with a limit under a quota policy needs it."""
    h = harness(policy="auto")
    for i in range(20):
        be = h.add_pod(make_pod(f"be-{i}", api.QOSClass.BE))
        h.metrics.set(api.POD_CPU_USAGE, 0.1, {"pod_uid": be.uid})
        h.add_pod(make_pod(f"ls-{i}", api.QOSClass.LS, cpu_limit_milli=0))
    h.metrics.set(api.NODE_CPU_USAGE, 2.0)
    plugin = started(h)
    for _ in range(3):
        plugin.reconcile()
    assert h.metrics.queries == 0
    pod = ls_pod(h, limit=1000)
    throttled(h, pod)
    before = h.metrics.queries
    plugin.reconcile()
    # the node, every BE pod, then the container's own usage and throttling
    assert h.metrics.queries - before >= 1 + 20
