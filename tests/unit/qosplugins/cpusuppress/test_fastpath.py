"""BECPUSuppress's fast path: ~50 ms node samples shrink BE at once on a rise above the learnt noise,
never grow it, respect the per-pod floor, and stand aside while a periodic reconcile holds the lock."""

from __future__ import annotations

import random

import pytest

from koordlet import api
from koordlet.testing import Harness, be_slo, make_harness
from qosplugins.cpusuppress import BECPUSuppress
from qosplugins.cpusuppress import budget as _budget
from tests.unit.qosplugins.cpusuppress.test_plugin import BE, HT8, set_usage, setup_load, started


def fast_sample(h: Harness, node: float, be: float, after: float = 0.05) -> None:
    """One fast sample ``after`` seconds after the last (cores): 50 ms, or the 10 ms confirm window."""
    h.clock.advance(after)
    h.metrics.set(api.NODE_CPU_USAGE_FAST, node)
    h.metrics.set(api.BE_CPU_USAGE_FAST, be)
    h.publish(api.EVENT_NODE_SAMPLE)


def quiet_samples(h: Harness, node: float, be: float, spread: float = 0.0, n: int = 12) -> None:
    """``n`` fast samples at one level, alternately ``spread`` cores above and below it: the noise band
    the fast path learns before it acts."""
    for i in range(n):
        fast_sample(h, node + (spread if i % 2 else -spread), be)


def reconciled(
    policy: str = "cpuset", ls_cores: float = 2.0, be_cores: float = 3.0
) -> tuple[Harness, BECPUSuppress]:
    """A started plugin after its first periodic decision (2 cores LS, 3 BE, 0.5 system: non-BE 2500m)."""
    h = make_harness(1, HT8, slo=be_slo(cpu_suppress_policy=policy))
    setup_load(h, ls_cores=ls_cores, be_cores=be_cores)
    plugin = started(h)
    plugin.reconcile()
    return h, plugin


@pytest.mark.parametrize("policy", ["cpuset", "cfsQuota"])
def test_fast_sample_with_ls_rise_shrinks_without_waiting(policy: str) -> None:
    h, _plugin = reconciled(policy)  # 3 CPUs / 270000 us, non-BE 2500m
    quiet_samples(h, 5.5, 3.0)  # within the 1 s interval: no periodic tick
    before = len(h.executor.updates)
    fast_sample(h, 7.5, 2.5)
    if policy == "cpuset":
        # a cpuset step is a whole CPU: the rise must hold in the next (confirm) sample too
        assert len(h.executor.updates) == before
        fast_sample(h, 7.5, 2.5, after=0.01)
    # fast non-BE = (7.5 - 2.5) * 1000 = 5000m (above the per-pod floor 2000m)
    # budget = 5200 - 5000 = 200m -> cpuset floor 2 CPUs (0,4) / quota 20000 us
    assert len(h.executor.updates) > before
    if policy == "cpuset":
        assert api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "") == {0, 4}
        assert h.executor.errors == []
    else:
        assert h.host.read("cpu.cfs_quota_us", BE) == "20000"


def test_fast_path_never_grows_and_ignores_small_rises() -> None:
    h, _plugin = reconciled()
    quiet_samples(h, 5.5, 3.0)
    before = len(h.executor.updates)
    fast_sample(h, 3.5, 3.0)  # non-BE falls to 500m: would grow BE
    fast_sample(h, 5.55, 3.0)  # non-BE 2550m: a rise of 50m < 1% of 8000m
    assert len(h.executor.updates) == before
    fast_sample(h, 6.3, 3.0)  # 800m, with no noise seen: budget 1900m, two CPUs...
    assert len(h.executor.updates) == before
    fast_sample(h, 6.3, 3.0, after=0.01)  # ...once the confirm sample shows it too
    assert len(h.executor.updates) > before


def test_a_one_window_burst_never_shrinks_a_cpuset() -> None:
    """A burst of other work that shows in one window only (the sample after it is back at the
    level) is not an LS rise: under ``cpuset`` the BE CPUs stay; under ``cfsQuota`` it is acted on at once
    (a quota step follows the rise's size, and the reaction time is what that path is measured by)."""
    h, _plugin = reconciled()
    cpus = h.host.read("cpuset.cpus", BE)
    quiet_samples(h, 5.5, 3.0)
    for _ in range(5):
        fast_sample(h, 7.5, 3.0)  # +2 cores for one window
        quiet_samples(h, 5.5, 3.0, n=3)
    assert h.host.read("cpuset.cpus", BE) == cpus


def test_fast_path_acts_on_a_rise_above_the_noise_and_not_on_the_noise() -> None:
    """Samples spread +-300m around the level: a peak of +500m is noise (under twice the band), and the
    periodic tick's estimate is not raised by it; a rise of 1.5 cores is acted on at once."""
    h, plugin = reconciled("cfsQuota")  # budget 2700m
    quota = h.host.read("cpu.cfs_quota_us", BE)
    quiet_samples(h, 5.5, 3.0, spread=0.3, n=30)
    fast_sample(h, 6.0, 3.0)
    assert h.host.read("cpu.cfs_quota_us", BE) == quota, "shrunk on a noise peak"
    h.clock.advance(0.9)
    plugin.reconcile()  # the last fast sample is a peak; the median of the last 0.25 s is the level
    assert h.host.read("cpu.cfs_quota_us", BE) == quota
    quiet_samples(h, 5.5, 3.0, spread=0.3, n=4)
    fast_sample(h, 7.0, 3.0)  # non-BE 4000m: budget 5200 - 4000 = 1200m
    assert h.host.read("cpu.cfs_quota_us", BE) == "120000"


@pytest.mark.parametrize("policy", ["cpuset", "cfsQuota"])
def test_on_a_busy_node_a_spike_within_the_wide_band_that_holds_is_acted_on(policy: str) -> None:
    """Other work's bursts of +800m (one or two 40 ms windows) make the band ~800m: a spike of 1.5 cores
    is under 2.5 bands, yet it holds over the window, its confirm window and the next two, and BE shrinks
    then, not at the next periodic tick (~970 ms on a busy node)."""
    h, _plugin = reconciled(policy)  # non-BE 2500m: budget 2700m (3 CPUs / 270000 us)
    decided = len(h.executor.updates)
    rng, burst, quiet = random.Random(5), 0, True
    for _ in range(100):
        if burst == 0 and quiet and rng.random() < 0.3:
            burst = rng.choice((1, 2))
        quiet = burst == 0
        fast_sample(h, 5.5 + rng.uniform(-0.03, 0.03) + (0.8 if burst else 0.0), 3.0, after=0.04)
        burst = max(burst - 1, 0)
    before = len(h.executor.updates)
    assert before == decided, "the bursts alone shrank BE"
    for node, after in ((7.0, 0.04), (7.01, 0.01), (6.99, 0.03)):  # non-BE ~4000m
        fast_sample(h, node, 3.0, after=after)
    fast_sample(h, 7.02, 3.0, after=0.04)
    # the least of the span: non-BE 3990m, budget 5200 - 3990 = 1210m
    if policy == "cpuset":
        assert len(api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "")) == 2
    else:
        assert h.host.read("cpu.cfs_quota_us", BE) == "121000"
    assert len(h.executor.updates) > before and h.executor.updates[-1].reason.endswith("fast sample")


def test_a_rise_first_seen_in_part_is_acted_on_again_at_its_full_rate() -> None:
    """A spike that starts late in a window reads as part of its rate there; the next window's full rate
    is a further rise above the new decision, and shrinks BE again (the band learnt before is kept)."""
    h, plugin = reconciled("cfsQuota")
    quiet_samples(h, 5.5, 3.0, spread=0.1)
    fast_sample(h, 6.5, 3.0)  # a third of a 3-core spike: non-BE 3500m
    assert h.host.read("cpu.cfs_quota_us", BE) == "170000"
    fast_sample(h, 8.5, 3.0)  # the whole of it: non-BE 5500m, budget under the floor
    assert h.host.read("cpu.cfs_quota_us", BE) == "2000"
    h.clock.advance(0.9)
    plugin.reconcile()  # the periodic path keeps what the fast path saw (the median of 0.25 s)
    fast_sample(h, 8.5, 3.0)
    assert h.host.read("cpu.cfs_quota_us", BE) == "2000"


def test_fast_path_uses_per_pod_floor_when_tier_sample_is_low() -> None:
    h, _plugin = reconciled(ls_cores=4.0, be_cores=0.2)
    # non-BE = 4000 + 500 = 4500 -> budget 700m -> 2 CPUs
    assert len(api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "")) == 2
    before = len(h.executor.updates)
    quiet_samples(h, 1.0, 0.9)  # fast says 100m non-BE; per-pod floor says 4000m
    fast_sample(h, 1.0, 0.9)
    assert len(h.executor.updates) == before


def test_fast_path_does_not_run_while_reconcile_holds_the_lock() -> None:
    h = make_harness(1, HT8, slo=be_slo())
    ls, be = setup_load(h, ls_cores=2.0, be_cores=3.0)
    plugin = started(h)
    plugin.reconcile()
    quiet_samples(h, 5.5, 3.0)
    set_usage(h, ls, be, 3.0, 2.5)  # the next reconcile writes
    h.metrics.set(api.NODE_CPU_USAGE_FAST, 7.5)
    h.metrics.set(api.BE_CPU_USAGE_FAST, 2.5)
    during: list[int] = []

    def sample_arrives(_u: api.CgroupUpdate) -> None:
        # a node sample published while a periodic reconcile is writing (it holds the plugin's lock)
        if not during:
            during.append(len(h.executor.updates))
            h.publish(api.EVENT_NODE_SAMPLE)
            during.append(len(h.executor.updates))

    h.executor.on_update = sample_arrives
    plugin.reconcile()
    h.executor.on_update = None
    assert len(during) == 2 and during[1] == during[0]  # the fast path stood aside, no deadlock


def test_fast_samples_are_wanted_only_while_they_can_matter() -> None:
    """The fast path only shrinks BE, so it is armed while BE pods use CPU on a node within
    reach of the threshold (a rise of half the node would cross it), held armed for ARM_HOLD_SECONDS after
    (BE at its quota floor hovers around the arming level), and disarmed otherwise."""
    h = make_harness(1, HT8, slo=be_slo())  # 8 cores, threshold 65 %: armed from 15 % of the node
    ls, be = setup_load(h, ls_cores=2.0, be_cores=3.0)  # node 5.5 cores
    plugin = started(h)

    def wanted() -> bool:  # (a call: each reconcile changes what it reads)
        return h.fast_samples_wanted

    plugin.reconcile()
    assert wanted()
    h.clock.advance(1)
    set_usage(h, ls, be, 2.0, 0.05, 0.1)  # BE idle: nothing to take back
    plugin.reconcile()
    assert wanted(), "disarmed a tick after it last mattered"
    h.clock.advance(_budget.ARM_HOLD_SECONDS)
    set_usage(h, ls, be, 2.0, 0.05, 0.1)
    plugin.reconcile()
    assert not wanted()
    assert plugin.status()["fastSamplesWanted"] is False  # koordlet top and bench/reaction.py read it
    h.clock.advance(1)
    set_usage(h, ls, be, 0.0, 1.0, 0.1)  # 1.1 cores: 14 % of the node, out of reach
    plugin.reconcile()
    assert not wanted()
    h.clock.advance(1)
    set_usage(h, ls, be, 0.3, 1.0, 0.1)  # 1.4 cores: 17.5 %
    plugin.reconcile()
    assert wanted()
    assert plugin.status()["fastSamplesWanted"] is True
    h.states.slo = api.NodeSLO()  # the switch off
    plugin.reconcile()
    assert not wanted()
    h.states.slo = be_slo()
    plugin.reconcile()
    assert wanted()
    plugin.shutdown()
    assert not wanted()
