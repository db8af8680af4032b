"""The cfsQuota LS demand probe: it still reveals LS demand hidden by contention, and what it costs a
content BE tier is bounded (a node-sized step pinned a small BE tier at the floor 30 % of the
time)."""

from __future__ import annotations

import random

import pytest

from koordlet import api
from koordlet.testing import Harness, be_slo, make_harness, make_pod, topology
from qosplugins.cpusuppress import BECPUSuppress
from qosplugins.cpusuppress import budget as _budget

BE = "kubepods/besteffort"
HT8 = topology(sockets=1, cores=4, threads=2)


def quota(h: Harness) -> int:
    return int(h.host.read("cpu.cfs_quota_us", BE) or 0)


def pods(h: Harness) -> tuple[api.PodInfo, api.PodInfo]:
    ls = h.add_pod(make_pod("ls", api.QOSClass.LS, cpu_request_milli=1000))
    be = h.add_pod(make_pod("be", api.QOSClass.BE))
    return ls, be


def set_usage(h: Harness, ls: api.PodInfo, be: api.PodInfo, ls_c: float, be_c: float, sys_c: float) -> None:
    h.metrics.set(api.POD_CPU_USAGE, ls_c, {"pod_uid": ls.uid})
    h.metrics.set(api.POD_CPU_USAGE, be_c, {"pod_uid": be.uid})
    h.metrics.set(api.NODE_CPU_USAGE, ls_c + be_c + sys_c)


def started(h: Harness) -> BECPUSuppress:
    plugin = BECPUSuppress()
    h.start(plugin)
    return plugin


def test_probe_reveals_hidden_ls_demand_then_spaces_itself() -> None:
    # 2 cores, threshold 65 % = 1300m. The A3 fixed point: LS wants 0.75 core but shows 0.55 while BE
    # holds 0.75 (BE bursts on LS's core inside each period); given the room it shows its demand.
    h = make_harness(1, topology(cores=2), slo=be_slo(cpu_suppress_policy="cfsQuota"))
    ls, be = pods(h)
    plugin = started(h)
    quotas: list[int] = []
    for _ in range(62):
        last = quotas[-1] if quotas else 75000
        set_usage(h, ls, be, 0.75 if last <= 55000 else 0.55, last / 100_000, 0.0)  # BE uses all its quota
        plugin.reconcile()
        quotas.append(quota(h))
        h.clock.advance(1)
    # t0: 1300 - 550 = 750m -> 75000. t1: BE first seen quota-bound: the probe squeeze would be 20000
    # (10 % of 200000, under half of BE's 75000) = 26.7 % of BE for 3 s, so the next probe waits
    # 3 * 0.267 / 3 % = 26.7 s -> t28 (not at once: a restarted agent does not squeeze on sight).
    assert quotas[:28] == [75000] * 28
    # t28: squeezed to 55000; LS takes the room and the budget (1300 - 750 = 550m) keeps BE there.
    assert quotas[28:55] == [55000] * 27
    # t55 (26.7 s after t28): the next probe, 20000 of 55000, held 3 s; LS wants no more -> BE back.
    assert quotas[55:58] == [35000] * 3
    assert quotas[58:] == [55000] * 4


def test_probe_leaves_be_alone_when_not_quota_bound() -> None:
    h = make_harness(1, topology(cores=2), slo=be_slo(cpu_suppress_policy="cfsQuota"))
    ls, be = pods(h)
    plugin = started(h)
    for _ in range(60):
        set_usage(h, ls, be, 0.55, 0.3, 0.0)  # BE uses 0.3 of its 0.75 core: something else limits it
        plugin.reconcile()
        h.clock.advance(1)
    assert h.executor.values_written("cpu.cfs_quota_us", BE) == ["75000"]


@pytest.mark.parametrize("restart_at", [None, 100])
def test_probe_costs_a_small_be_tier_at_most_5_percent(restart_at: int | None) -> None:
    # The case that set the bound: 8 CPUs (one step = 80000 us), a content LS leaves BE 300m = 30000 us, below
    # one step. The old probe held BE at the 2000 us floor 3 s of every 10 s: 28 % of BE's CPU.
    h = make_harness(1, HT8, slo=be_slo(cpu_suppress_policy="cfsQuota"))
    ls, be = pods(h)
    plugin = started(h)
    quotas: list[int] = []
    for t in range(400):
        if t == restart_at:
            plugin.shutdown()  # restores BE to unlimited; the new agent writes its budget again
            plugin = started(h)
            quotas.clear()
        last = quota(h)
        set_usage(h, ls, be, 4.4, last / 100_000 if last > 0 else 2.0, 0.5)  # 5200 - 4900 = 300m
        plugin.reconcile()
        quotas.append(quota(h))
        h.clock.advance(1)
    assert quotas[0] == 30000
    probed = [q for q in quotas if q < 30000]
    assert probed, "the probe never ran"
    assert min(probed) == 15000  # half of BE's own quota, not the floor
    assert all(q == 30000 for q in quotas[:10])  # none on sight, also right after a restart
    lost = sum(30000 - q for q in quotas) / (30000 * len(quotas))
    assert lost <= 0.05


@pytest.mark.parametrize("cores", [2, 8, 64])
@pytest.mark.parametrize("be_fraction", [0.02, 0.1, 0.3, 0.6, 1.0])
def test_probe_cost_bound_holds_for_any_quota(cores: int, be_fraction: float) -> None:
    # BE always uses its whole quota and LS never takes the room: everything the probe squeezes is lost.
    capacity = cores * 1000
    current = max(int(_budget.capacity_quota(capacity) * be_fraction), 2000)
    probe = _budget.DemandProbe()
    lost = 0
    seconds = 3600
    for t in range(seconds):
        ceiling = probe.limit(float(t), current, current / 100.0, 500.0, capacity)
        lost += current - ceiling if ceiling is not None else 0
    assert lost / (current * seconds) <= 0.05
    if current * 0.5 >= 0.01 * _budget.capacity_quota(capacity):
        assert lost > 0  # it still probes: only a squeeze inside the 1 % band is skipped


@pytest.mark.parametrize("stall_every", [None, 3])
def test_probe_cost_bound_holds_with_late_and_stalled_ticks(stall_every: int | None) -> None:
    """Reconcile ticks come a few ms late on their grid (a probe planned for 3 s then ran to a fourth
    tick: 4-5 % on the real kernel), and a stalled agent can miss a tick mid-hold: the hold ends at the
    tick nearest its planned end, and the next probe is spaced by the time the hold really took."""
    rng = random.Random(7)
    capacity = 2000
    current = 25000
    probe = _budget.DemandProbe()
    lost = 0.0
    probes = 0
    t_prev, ceiling_prev = 0.0, None
    for k in range(1, 3600):
        if stall_every and probe.started is not None and k % stall_every == 0:
            continue  # this tick never ran: the previous ceiling stays in force until the next one
        t = k + rng.uniform(0.0, 0.03)
        if ceiling_prev is not None:
            lost += (current - ceiling_prev) * (t - t_prev)
        ceiling = probe.limit(t, current, current / 100.0, 500.0, capacity)
        if ceiling is not None and ceiling_prev is None:
            probes += 1
        t_prev, ceiling_prev = t, ceiling
    assert probes >= 20
    assert lost / (current * t_prev) <= probe.cost_fraction * 1.05


def test_the_fast_path_stays_disarmed_while_no_spike_can_reach_a_be_tier_under_its_own_limit() -> None:
    """The real-cluster LS spike (two CPUs, threshold 100 %, one BE pod held at 200m by its own batch-cpu
    limit, the node otherwise near idle) shrank the BE quota after ~0.8 s, by the 1 s path: the fast path
    was not armed, by design. A shrink matters only when BE uses more than the budget left after a rise,
    i.e. when node usage plus the rise crosses the threshold; a rise of half the node cannot take the node
    from 0.5 to 2 cores, so the write took nothing from BE. With BE burning up to its budget the node
    is within reach and the fast path arms."""
    held = _budget.Usage(
        capacity_milli=2000,
        node_used_milli=500.0,
        pod_non_be_milli=0.0,
        host_app_non_be_milli=0.0,
        be_pods_milli=200.0,
        system_milli=300.0,
        reserved_milli=0,
    )
    assert not _budget.fast_path_matters(held, 100)
    burning = _budget.Usage(
        capacity_milli=2000,
        node_used_milli=1900.0,
        pod_non_be_milli=0.0,
        host_app_non_be_milli=0.0,
        be_pods_milli=1600.0,
        system_milli=300.0,
        reserved_milli=0,
    )
    assert _budget.fast_path_matters(burning, 100)
