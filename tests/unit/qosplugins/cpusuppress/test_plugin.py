"""BECPUSuppress on fake v1 and v2 hosts: the budget formula, both policies, recovery, the fast path."""

from __future__ import annotations

import json
import logging

import pytest

from koordlet import api
from koordlet.testing import Harness, be_slo, make_harness, make_node, make_pod, topology
from qosplugins.cpusuppress import BECPUSuppress
from qosplugins.cpusuppress import cpuset as _cpuset

BE = "kubepods/besteffort"
HT8 = topology(sockets=1, cores=4, threads=2)  # cpu c and c+4 are siblings of core c


def setup_load(
    h: Harness, ls_cores: float, be_cores: float, system_cores: float = 0.5
) -> tuple[api.PodInfo, ...]:
    """One LS and one BE pod with the given usage; node usage = their sum + system."""
    ls = h.add_pod(make_pod("ls", api.QOSClass.LS, cpu_request_milli=1000))
    be = h.add_pod(make_pod("be", api.QOSClass.BE))
    set_usage(h, ls, be, ls_cores, be_cores, system_cores)
    return ls, be


def set_usage(
    h: Harness, ls: api.PodInfo, be: api.PodInfo, ls_c: float, be_c: float, sys_c: float = 0.5
) -> None:
    h.metrics.set(api.POD_CPU_USAGE, ls_c, {"pod_uid": ls.uid})
    h.metrics.set(api.POD_CPU_USAGE, be_c, {"pod_uid": be.uid})
    h.metrics.set(api.NODE_CPU_USAGE, ls_c + be_c + sys_c)


def be_dirs(h: Harness) -> list[str]:
    return list(h.host.list_cgroups(BE, 2))


def started(h: Harness) -> BECPUSuppress:
    plugin = BECPUSuppress()
    h.start(plugin)
    return plugin


@pytest.mark.parametrize("version", [1, 2])
def test_cpuset_policy_confines_every_be_level(version: int) -> None:
    h = make_harness(version, HT8, slo=be_slo())
    setup_load(h, ls_cores=2.0, be_cores=3.0)
    started(h).reconcile()
    # system = max(5500 - 5000, 0, 0) = 500; non-BE = 2000 + 500 = 2500
    # budget = 8000 * 65% - 2500 = 2700m -> ceil = 3 CPUs
    # one bucket ordered by (core, cpu): 0,4,1,5,... -> pair (0,4), then single 1
    for d in be_dirs(h):
        assert api.parse_cpuset(h.host.read("cpuset.cpus", d) or "") == {0, 1, 4}, d
    assert len(be_dirs(h)) == 3  # tier, pod, container
    assert h.executor.errors == []  # v1: executor ordering avoided EBUSY/EACCES
    assert api.parse_cpuset(h.host.read("cpuset.cpus", "kubepods/burstable") or "") == set(range(8))
    assert (
        h.registry.get_sample_value("koordlet_be_suppress_cpu_cores", {"node": "node-1", "type": "cpuset"})
        == 3
    )
    assert h.registry.get_sample_value("koordlet_be_suppress_ls_used_cpu_cores", {"node": "node-1"}) == 2.0


def test_cpuset_growth_is_rate_limited_and_shrink_is_not() -> None:
    h = make_harness(1, HT8, slo=be_slo())
    ls, be = setup_load(h, ls_cores=2.0, be_cores=3.0)
    plugin = started(h)
    plugin.reconcile()
    assert len(api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "")) == 3
    h.clock.advance(1)
    set_usage(h, ls, be, 0.0, 3.0)
    plugin.reconcile()
    # non-BE = 0 + system 500 -> budget 4700m -> 5 CPUs, but growth <= old 3 + ceil(8 * 10%) = 4
    assert len(api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "")) == 4
    h.clock.advance(1)
    set_usage(h, ls, be, 0.0, 3.0)
    plugin.reconcile()
    assert len(api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "")) == 5
    h.clock.advance(1)
    set_usage(h, ls, be, 6.0, 1.0)
    plugin.reconcile()
    # non-BE = 6000 + 500 -> budget -1300m -> floor of 2 CPUs, at once
    assert api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "") == {0, 4}
    assert h.executor.errors == []


def test_min_percent_is_a_floor_for_the_budget() -> None:
    h = make_harness(1, HT8, slo=be_slo(cpu_suppress_min_percent=50))
    setup_load(h, ls_cores=7.0, be_cores=0.5)
    started(h).reconcile()
    # budget = max(5200 - (7000 + 500), 8000 * 50%) = 4000m -> 4 CPUs: pairs (0,4), (1,5)
    assert api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "") == {0, 1, 4, 5}


def test_reserved_cpus_are_excluded_and_count_as_system_use() -> None:
    node = make_node(8000, 16 << 30, reserved_cpus=frozenset({0, 1}))
    h = make_harness(1, HT8, node=node, slo=be_slo())
    setup_load(h, ls_cores=2.0, be_cores=3.0)
    started(h).reconcile()
    # system = max(500, 0, reserved 2 CPUs = 2000) = 2000; non-BE = 4000; budget = 1200m -> 2 CPUs
    # usable {2..7} by (core, cpu): 4(c0), 5(c1), 2,6(c2), 3,7(c3): Koordinator takes the first free
    # sibling pair wherever it sits in the bucket -> (2, 6), not the lone 4 and 5 of two half-cores
    assert api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "") == {2, 6}


@pytest.mark.parametrize("version", [1, 2])
def test_cfs_quota_policy_floor_step_and_hysteresis(version: int) -> None:
    h = make_harness(version, HT8, slo=be_slo(cpu_suppress_policy="cfsQuota"))
    # BE stays under 90 % of its quota here, so the LS demand probe keeps out of the arithmetic
    ls, be = setup_load(h, ls_cores=2.0, be_cores=2.0)
    plugin = started(h)
    plugin.reconcile()
    # system = 4500 - 4000 = 500; non-BE = 2500; budget = 5200 - 2500 = 2700m
    # -> 2700 * 100000 / 1000 = 270000 us (from unlimited: written as is)
    assert h.executor.values_written("cpu.cfs_quota_us", BE) == ["270000"]
    assert h.host.read("cpu.cfs_quota_us", BE) == str(270000)
    assert (
        h.registry.get_sample_value("koordlet_be_suppress_cpu_cores", {"node": "node-1", "type": "cfsQuota"})
        == 2.7
    )

    h.clock.advance(1)
    set_usage(h, ls, be, 1.0, 2.0)
    plugin.reconcile()
    # budget 8000*0.65 - 1500 = 3700m -> 370000; step cap 10% of 800000 = 80000 -> 270000 + 80000
    assert h.executor.values_written("cpu.cfs_quota_us", BE)[-1] == "350000"

    h.clock.advance(1)
    set_usage(h, ls, be, 1.0, 2.0)
    plugin.reconcile()
    # 370000 - 350000 = 20000 >= 1% band (8000): written
    assert h.executor.values_written("cpu.cfs_quota_us", BE)[-1] == "370000"

    h.clock.advance(1)
    set_usage(h, ls, be, 1.05, 2.0)
    plugin.reconcile()
    # budget 3650m -> 365000: |365000 - 370000| = 5000 < 8000 -> skipped
    assert h.executor.values_written("cpu.cfs_quota_us", BE)[-1] == "370000"

    h.clock.advance(1)
    set_usage(h, ls, be, 7.9, 0.1)
    plugin.reconcile()
    # budget 5200 - 8400 < 0 -> floor 2000 us
    assert h.executor.values_written("cpu.cfs_quota_us", BE)[-1] == "2000"
    # the quota policy leaves every cpuset at all usable CPUs
    assert api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "") == set(range(8))


def test_quota_never_exceeds_capacity() -> None:
    h = make_harness(
        1, topology(cores=2), slo=be_slo(cpu_suppress_policy="cfsQuota", cpu_suppress_threshold_percent=100)
    )
    setup_load(h, ls_cores=0.0, be_cores=0.0, system_cores=0.0)
    started(h).reconcile()
    # budget = 2000 * 100% - 0 = 2000m -> 200000 us = capacity (2 cores), not more
    assert h.executor.values_written("cpu.cfs_quota_us", BE) == ["200000"]


def test_switching_policy_recovers_the_other_one() -> None:
    h = make_harness(1, HT8, slo=be_slo(cpu_suppress_policy="cfsQuota"))
    setup_load(h, ls_cores=2.0, be_cores=3.0)
    plugin = started(h)
    plugin.reconcile()
    assert h.host.read("cpu.cfs_quota_us", BE) == "270000"
    h.states.slo = be_slo(cpu_suppress_policy="cpuset")
    h.clock.advance(1)
    plugin.reconcile()
    assert h.host.read("cpu.cfs_quota_us", BE) == "-1"
    assert api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "") == {0, 1, 4}


@pytest.mark.parametrize("version", [1, 2])
def test_disabled_switch_restores_once(version: int) -> None:
    h = make_harness(version, HT8, slo=be_slo())
    setup_load(h, ls_cores=2.0, be_cores=3.0)
    plugin = started(h)
    plugin.reconcile()
    h.host.values[("cpu.cfs_quota_us", BE)] = str(50000)  # a quota left from before
    h.states.slo = api.NodeSLO()  # enable defaults to false
    plugin.reconcile()
    assert h.host.read("cpu.cfs_quota_us", BE) == str(-1)
    for d in be_dirs(h):
        assert api.parse_cpuset(h.host.read("cpuset.cpus", d) or "") == set(range(8))
    writes = len(h.executor.updates)
    plugin.reconcile()
    plugin.reconcile()
    assert len(h.executor.updates) == writes  # once, not every tick


def test_non_be_pod_in_be_tier_is_never_confined(caplog: pytest.LogCaptureFixture) -> None:
    h = make_harness(1, HT8, slo=be_slo())
    setup_load(h, ls_cores=2.0, be_cores=3.0)
    odd = h.add_pod(make_pod("mislabelled", api.QOSClass.LS, kube_qos=api.KubeQOSClass.BESTEFFORT))
    with caplog.at_level(logging.WARNING):
        started(h).reconcile()
    assert all(
        api.parse_cpuset(u.value) == set(range(8)) for u in h.executor.updates if u.resource == "cpuset.cpus"
    )
    assert api.parse_cpuset(h.host.read("cpuset.cpus", odd.cgroup_dir) or "") == set(range(8))
    assert "mislabelled" in caplog.text


def test_no_node_sample_means_no_write() -> None:
    h = make_harness(1, HT8, slo=be_slo())
    h.add_pod(make_pod("be"))
    started(h).reconcile()
    assert h.executor.updates == []


def test_shutdown_restores_and_releases() -> None:
    h = make_harness(1, HT8, slo=be_slo(cpu_suppress_policy="cfsQuota"))
    setup_load(h, ls_cores=2.0, be_cores=3.0)
    plugin = started(h)
    plugin.reconcile()
    plugin.shutdown()
    assert h.host.read("cpu.cfs_quota_us", BE) == "-1"
    assert h.executor.released == ["BECPUSuppress"]


def test_dry_run_decides_but_host_is_unchanged() -> None:
    h = make_harness(1, HT8, slo=be_slo(), dry_run=True)
    setup_load(h, ls_cores=2.0, be_cores=3.0)
    started(h).reconcile()
    assert {u.value for u in h.executor.updates if u.cgroup_dir == BE} >= {"0-1,4"}
    assert api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "") == set(range(8))


# -- fast path ------------------------------------------------------------------------------------


def test_run_schedules_reconcile_and_subscribes_to_node_samples() -> None:
    h = make_harness(1, HT8, slo=be_slo())
    h.options["cpu-suppress-interval-seconds"] = 3.0
    plugin = started(h)
    assert [i for i, _ in h.scheduled] == [3.0]
    assert h.handlers[api.EVENT_NODE_SAMPLE] == [plugin.on_node_sample]


def test_policy_file_missing_pauses_with_warning(caplog: pytest.LogCaptureFixture) -> None:
    h = make_harness(2, HT8, slo=be_slo())
    h.host.supported.discard("cpuset.cpus")  # v2 without the cpuset controller in the subtree
    setup_load(h, ls_cores=2.0, be_cores=3.0)
    with caplog.at_level(logging.WARNING):
        started(h).reconcile()
    assert h.executor.updates == []
    assert "cpuset.cpus is not available" in caplog.text


def test_lse_cpus_are_excluded_and_lsr_share_is_proportional() -> None:
    h = make_harness(1, HT8, slo=be_slo())
    status = "scheduling.koordinator.sh/resource-status"
    lse = h.add_pod(make_pod("lse", api.QOSClass.LSE, annotations={status: json.dumps({"cpuset": "0,4"})}))
    lsr = h.add_pod(make_pod("lsr", api.QOSClass.LSR, annotations={status: json.dumps({"cpuset": "1,5"})}))
    setup_load(h, ls_cores=1.2, be_cores=1.0)
    for p in (lse, lsr):
        h.metrics.set(api.POD_CPU_USAGE, 0.0, {"pod_uid": p.uid})
    started(h).reconcile()
    # non-BE = 1200 + 500 = 1700 -> budget 3500m -> 4 CPUs from usable {1,2,3,5,6,7} (LSE's 0,4 out)
    # LSR pool {1,5} is 2 of 6: 4 * 2 // 6 = 1 from it (cpu 1);
    # 3 from the LS pool {2,6,3,7}: pair (2,6), then 3
    assert api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "") == {1, 2, 3, 6}


def test_pick_spreads_over_sockets_in_sibling_pairs() -> None:
    # two sockets, siblings c and c+4: buckets socket0 = [0,4,1,5], socket1 = [2,6,3,7] by (core, cpu)
    cpus = topology(sockets=2, cores=2, threads=2)
    assert _cpuset.pick_spread(cpus, 3) == [0, 2, 4]  # pair (0,4) from socket0, then one from socket1
    assert _cpuset.pick_spread(cpus, 4) == [0, 2, 4, 6]
    assert _cpuset.pick_spread(cpus, 9) == []


def test_unchanged_cpuset_is_rewritten_quietly(caplog: pytest.LogCaptureFixture) -> None:
    h = make_harness(1, HT8, slo=be_slo())
    ls, be = setup_load(h, ls_cores=2.0, be_cores=3.0)
    plugin = started(h)
    with caplog.at_level(logging.INFO):
        plugin.reconcile()
        assert "BE cpuset -> 0-1,4" in caplog.text
        caplog.clear()
        h.clock.advance(1)
        set_usage(h, ls, be, 2.0, 3.0)
        plugin.reconcile()
    assert h.executor.values_written("cpuset.cpus", BE)[-1] == "0-1,4"  # re-sent for new children
    assert "BE cpuset" not in caplog.text
