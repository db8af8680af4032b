"""FastSampler: node busy ticks and BE counter every window, then EVENT_NODE_SAMPLE."""

from __future__ import annotations

from typing import Any

import pytest

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.fastsampler import FastSampler, FastSamplerConfig, busy_ticks
from koordlet.system.cgroups import CgroupMode
from koordlet.testing import FakeClock
from tests.support.recording import RecordingBus, RecordingErrors
from tests.unit.koordlet.metricsadvisor.conftest import make_host

TIER = "kubepods/besteffort"


def set_be(fh: Any, ns: int) -> None:
    if fh.mode is CgroupMode.V2:
        fh.write_cgroup("cpu.stat", TIER, f"usage_usec {ns // 1000}\nuser_usec 0\n")
    else:
        fh.write_cgroup("cpuacct.usage", TIER, str(ns))


def one(cache: MetricCache, metric: str) -> float | None:
    got = cache.latest(metric)
    return got[0][2] if got else None


def test_busy_ticks_parses_the_aggregate_line() -> None:
    assert busy_ticks(b"cpu  10 2 3 400 50 6 7 8 0 0") == 10 + 2 + 3 + 6 + 7
    with pytest.raises(ValueError):
        busy_ticks(b"cpu0 1 2 3 4 5 6 7")


@pytest.mark.parametrize("force_python", [False, True])
def test_fast_sample_by_hand_then_publish(
    host_tree: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors, force_python: bool
) -> None:
    fh = host_tree
    fh.write_proc_stat(user=1000, system=100, idle=5000, per_cpu=((0,), (0,)))
    set_be(fh, 7_000_000_000)
    bus = RecordingBus()
    sampler = FastSampler(
        FastSamplerConfig(0.1, clk_tck=100, force_python=force_python),
        fw.Options(cache=cache, clock=fake_clock, errors=errors, host=make_host(fh)),
        bus=bus,
    )
    sampler.collect()
    assert bus.events == []  # baseline
    fake_clock.advance(0.1)
    fh.write_proc_stat(user=1012, system=103, idle=5005, per_cpu=((0,), (0,)))  # 15 busy ticks in 100 ms
    set_be(fh, 7_090_000_000)  # 90 ms of BE CPU
    sampler.collect()
    assert one(cache, api.NODE_CPU_USAGE_FAST) == pytest.approx(15 / (0.1 * 100))
    assert one(cache, api.BE_CPU_USAGE_FAST) == pytest.approx(0.9)
    assert bus.events == [api.EVENT_NODE_SAMPLE]
    assert sampler.has_synced()
    sampler.close()


def test_missing_be_tier_still_publishes_node(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fake_host.write_proc_stat(user=0, per_cpu=((0,),))
    bus = RecordingBus()
    sampler = FastSampler(
        FastSamplerConfig(0.1, clk_tck=100),
        fw.Options(cache=cache, clock=fake_clock, errors=errors, host=make_host(fake_host)),
        bus=bus,
    )
    sampler.collect()
    fake_clock.advance(0.1)
    fake_host.write_proc_stat(user=5, per_cpu=((0,),))
    sampler.collect()
    assert one(cache, api.NODE_CPU_USAGE_FAST) == pytest.approx(0.5)
    assert cache.latest(api.BE_CPU_USAGE_FAST) == []
    assert bus.events == [api.EVENT_NODE_SAMPLE]


def test_counter_reset_skips_one_window(
    host_tree: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fh = host_tree
    fh.write_proc_stat(user=100, per_cpu=((0,),))
    set_be(fh, 5_000_000_000)
    bus = RecordingBus()
    sampler = FastSampler(
        FastSamplerConfig(0.1, clk_tck=100),
        fw.Options(cache=cache, clock=fake_clock, errors=errors, host=make_host(fh)),
        bus=bus,
    )
    sampler.collect()
    fake_clock.advance(0.1)
    fh.write_proc_stat(user=105, per_cpu=((0,),))
    set_be(fh, 1_000)
    sampler.collect()
    assert cache.latest(api.BE_CPU_USAGE_FAST) == []
    assert errors.kind(fw.ERR_COUNTER_RESET) == 1
    assert one(cache, api.NODE_CPU_USAGE_FAST) == pytest.approx(0.5)


def set_root(fh: Any, ns: int) -> None:
    if fh.mode is CgroupMode.V2:
        fh.write_cgroup("cpu.stat", "", f"usage_usec {ns // 1000}\nuser_usec 0\n")
    else:
        fh.write_cgroup("cpuacct.usage", "", str(ns))


def test_node_figure_comes_from_the_exact_root_counter_when_present(
    host_tree: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fh = host_tree
    fh.write_proc_stat(user=1000, idle=5000, per_cpu=((0,), (0,)))
    set_root(fh, 50_000_000_000)
    set_be(fh, 7_000_000_000)
    sampler = FastSampler(
        FastSamplerConfig(0.1, clk_tck=100),
        fw.Options(cache=cache, clock=fake_clock, errors=errors, host=make_host(fh)),
        bus=RecordingBus(),
    )
    sampler.collect()
    fake_clock.advance(0.1)
    # /proc/stat says 20 ticks (2.0 cores, tick-quantised); the root counter says 137 ms: 1.37 cores.
    fh.write_proc_stat(user=1020, idle=5000, per_cpu=((0,), (0,)))
    set_root(fh, 50_137_000_000)
    set_be(fh, 7_040_000_000)
    sampler.collect()
    assert one(cache, api.NODE_CPU_USAGE_FAST) == pytest.approx(1.37)
    assert one(cache, api.BE_CPU_USAGE_FAST) == pytest.approx(0.4)
    sampler.close()


@pytest.mark.parametrize("confirm_after", [0.01, 0.0])
def test_a_non_be_rise_is_confirmed_by_a_short_window_after_it(
    host_tree: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors, confirm_after: float
) -> None:
    """A load that starts late in a window shows as a fraction of its rate; the confirm window 10 ms later
    lies wholly after the rise and reads the full rate, so the plugin need not wait a whole interval."""
    fh = host_tree
    fh.write_proc_stat(user=1000, idle=5000, per_cpu=((0,), (0,)))
    root, be = 50_000_000_000, 7_000_000_000
    set_root(fh, root)
    set_be(fh, be)
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # the LS core keeps running while the sampler waits
        nonlocal root, be
        slept.append(seconds)
        fake_clock.advance(seconds)
        root, be = root + int(seconds * 1.9e9), be + int(seconds * 0.9e9)
        set_root(fh, root)
        set_be(fh, be)

    bus = RecordingBus()
    sampler = FastSampler(
        FastSamplerConfig(0.05, clk_tck=100, confirm_after=confirm_after),
        fw.Options(cache=cache, clock=fake_clock, errors=errors, host=make_host(fh)),
        bus=bus,
        sleep=sleep,
    )
    sampler.collect()  # baseline
    for _ in range(2):  # steady: BE 0.9, non-BE 0.1 core
        fake_clock.advance(0.05)
        root, be = root + 50_000_000, be + 45_000_000
        set_root(fh, root)
        set_be(fh, be)
        sampler.collect()
    assert slept == [] and len(bus.events) == 2
    # LS starts 10 ms before the next sample: 1 core for 10 ms reads as +0.2 core over the 50 ms window
    fake_clock.advance(0.05)
    root, be = root + 50_000_000 + 10_000_000, be + 45_000_000
    set_root(fh, root)
    set_be(fh, be)
    sampler.collect()
    if confirm_after == 0:
        assert slept == [] and len(bus.events) == 3
        assert one(cache, api.NODE_CPU_USAGE_FAST) == pytest.approx(1.2)
        return
    assert slept == [0.01] and sampler.confirms == 1 and len(bus.events) == 4
    # the confirm window saw the whole new rate: node 1.9 cores, BE 0.9, so non-BE 1.0 (not 0.3)
    assert one(cache, api.NODE_CPU_USAGE_FAST) == pytest.approx(1.9)
    assert one(cache, api.BE_CPU_USAGE_FAST) == pytest.approx(0.9)
    # the next window at the new level is no rise: no second confirm
    fake_clock.advance(0.05)
    root, be = root + int(0.05 * 1.9e9), be + int(0.05 * 0.9e9)
    set_root(fh, root)
    set_be(fh, be)
    sampler.collect()
    assert slept == [0.01] and sampler.confirms == 1
    assert one(cache, api.NODE_CPU_USAGE_FAST) == pytest.approx(1.9)
    assert errors.kind(fw.ERR_CLOCK) == 0
    sampler.close()


def test_the_agents_own_bursts_are_put_back_to_their_average(
    host_tree: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    """A sweep of the agent's that burns 30 ms in a 50 ms window read as +0.6 core of non-BE
    load. With the process's CPU clock read each sample, the window keeps only the agent's average."""
    fh = host_tree
    fh.write_proc_stat(user=1000, idle=5000, per_cpu=((0,), (0,)))
    root, own = 50_000_000_000, 0.0
    set_root(fh, root)
    set_be(fh, 7_000_000_000)
    sampler = FastSampler(
        FastSamplerConfig(0.05, clk_tck=100, confirm_after=0.0),
        fw.Options(cache=cache, clock=fake_clock, errors=errors, host=make_host(fh)),
        bus=RecordingBus(),
        own_cpu=lambda: own,
    )
    sampler.collect()
    seen: list[float | None] = []
    for i in range(40):  # 2 s: LS 1 core steady, the agent 2 ms every window (0.04 core)
        fake_clock.advance(0.05)
        burst = 0.03 if i == 30 else 0.002
        root, own = root + int((0.05 + burst) * 1e9), own + burst
        set_root(fh, root)
        sampler.collect()
        seen.append(one(cache, api.NODE_CPU_USAGE_FAST))
    assert seen[29] == pytest.approx(1.04, abs=0.005)
    # the burst window measured 1.6 cores; the agent's 0.6 is put back to its average, 0.04 + 0.05 * 0.56
    assert seen[30] == pytest.approx(1.068, abs=0.005)
    sampler.close()


def test_the_sampler_sleeps_while_nobody_wants_samples(
    host_tree: Any, cache: MetricCache, errors: RecordingErrors
) -> None:
    """Twenty wake-ups a second were most of an idle agent's cost. The sampler's thread waits
    until a plugin wants fast samples, samples while it does, and waits again."""
    import threading
    import time

    from koordlet.metricsadvisor.fastsampler import FastSampling
    from koordlet.testing import wait_until
    from koordlet.testing.wakeups import voluntary_switches

    fh = host_tree
    fh.write_proc_stat(user=1000, idle=5000, per_cpu=((0,), (0,)))
    set_root(fh, 1)
    set_be(fh, 1)
    bus = RecordingBus()
    arming = FastSampling()
    sampler = FastSampler(
        FastSamplerConfig(0.01),
        fw.Options(cache=cache, clock=time.monotonic, errors=errors, host=make_host(fh)),
        bus=bus,
        arming=arming,
    )
    assert sampler.has_synced()  # nothing asked for: nothing to wait for at start
    stop = threading.Event()
    thread = threading.Thread(target=sampler.run, args=(stop,))
    thread.start()
    try:
        assert not wait_until(lambda: bus.events, 0.3, step=0.05)
        arming.want("BECPUSuppress", True)
        assert wait_until(lambda: len(bus.events) >= 3, 10, step=0.02)
        arming.want("BECPUSuppress", False)
        time.sleep(0.05)  # a sample already under way may still publish
        seen = len(bus.events)
        assert not wait_until(lambda: len(bus.events) > seen, 0.3, step=0.05)
        assert errors.kind(fw.ERR_CLOCK) == 0
        # disarmed, the thread sleeps (it woke every second to look at stop)
        before = voluntary_switches(thread)
        time.sleep(2.5)
        assert voluntary_switches(thread) - before <= 1
    finally:
        stop.set()
        sampler.close()  # as the advisor's shutdown: wakes the disarmed thread
        thread.join(2)
    assert not thread.is_alive()


def test_the_agents_own_cpu_is_read_with_the_counters_not_after(
    host_tree: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    """The own CPU was read after the counters: the agent's CPU spent in between (another thread, while
    the sampler waited to take the GIL back after the C read) counted in this window's own share but in
    the next window's node counter, two spikes of opposite sign per burst. Read just before the counters,
    what the agent burns in between lands in both, and the correction keeps the samples flat."""
    fh = host_tree
    fh.write_proc_stat(user=1000, idle=5000, per_cpu=((0,), (0,)))
    root, own, calls = 50_000_000_000, 0.0, 0
    set_root(fh, root)
    set_be(fh, 7_000_000_000)

    def own_cpu() -> float:
        # every fifth read, another thread of the agent burns 20 ms just before it
        nonlocal root, own, calls
        calls += 1
        if calls % 5 == 0:
            root += 20_000_000
            own += 0.02
            set_root(fh, root)
        return own

    sampler = FastSampler(
        FastSamplerConfig(0.05, clk_tck=100, confirm_after=0.0),
        fw.Options(cache=cache, clock=fake_clock, errors=errors, host=make_host(fh)),
        bus=RecordingBus(),
        own_cpu=own_cpu,
    )
    sampler.collect()
    seen: list[float] = []
    for _ in range(40):  # LS 1 core steady
        fake_clock.advance(0.05)
        root += 50_000_000
        set_root(fh, root)
        sampler.collect()
        got = one(cache, api.NODE_CPU_USAGE_FAST)
        assert got is not None
        seen.append(got)
    steady = seen[10:]
    # the agent's average (0.08 core) on LS's 1 core, flat: no window carries another's burst
    assert max(steady) - min(steady) < 0.1
    sampler.close()
