"""The pod sweep's column fast path gives exactly what the per-target loop gives, across everything that
makes it step aside (resets, malformed files, clock steps, pods coming and going) and back."""

from __future__ import annotations

import random
from typing import Any

import pytest

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor import podcolumns
from koordlet.metricsadvisor.podresource import PodResourceCollector
from koordlet.testing import FakeClock, FakeStates, container_id, make_pod, pod_uid
from tests.support.podsweep import make, set_usage
from tests.support.recording import RecordingErrors

Dump = dict[str, dict[str, list[tuple[float, float]]]]


def scenario(seed: int) -> list[dict[str, Any]]:
    """Per step: the pods listed, per target its event, and the clock advance after the sweep."""
    rng = random.Random(seed)
    steps = []
    live = {1, 2, 3}
    for _ in range(40):
        if rng.random() < 0.08:
            live ^= {rng.randint(1, 5)}  # a pod appears or goes
        events = {
            i: rng.choices(["ok", "reset", "malformed", "throttle_back"], [85, 5, 5, 5])[0]
            for i in range(1, 6)
        }
        steps.append({"live": sorted(live), "events": events, "dt": rng.choice([1.0] * 12 + [0.0, 100.0])})
    return steps


def run(
    fh: Any, steps: list[dict[str, Any]], seed: int, *, force_python: bool = False
) -> tuple[Dump, dict[tuple[str, str], int], list[float]]:
    rng = random.Random(seed + 1)
    clock = FakeClock()
    cache = MetricCache(clock=clock, wall_clock=clock.wall)
    errors = RecordingErrors()
    shared = fw.SharedState()
    pods = {i: make_pod(f"pod-{i}", uid=pod_uid(i), container_ids=[container_id(i)]) for i in range(1, 6)}
    dirs = {i: (fh.pod_cgroup(p.uid), fh.container_cgroup(p.uid, container_id(i))) for i, p in pods.items()}
    counters = {d: [0, 0, 0] for pair in dirs.values() for d in pair}  # cpu ns, periods, throttled
    states = FakeStates()
    col = make(fh, cache, states, clock, errors, shared, force_python=force_python)
    sums: list[float] = []
    for step in steps:
        states.pod_list = [pods[i] for i in step["live"]]
        for i, pair in dirs.items():
            for d in pair:
                c = counters[d]
                event = step["events"][i]
                c[0] = rng.randint(0, 10**8) if event == "reset" else c[0] + rng.randint(0, 10**9)
                dp = rng.randint(0, 10)
                c[1] += dp
                c[2] = max(c[2] - 5, 0) if event == "throttle_back" else c[2] + rng.randint(0, dp)
                set_usage(fh, d, cpu_ns=c[0], anon=rng.randint(0, 10**9), periods=c[1], throttled=c[2])
                if event == "malformed":
                    fh.write_cgroup("memory.stat", d, "total_active_anon x\nactive_anon x\n")
        col.collect()
        got = shared.get(fw.PODS_CPU)
        sums.append(-1.0 if got is None else got.value)
        clock.advance(step["dt"])
    assert (col._columns._fast is None) is force_python  # the C sweep where the C reader reads
    dump: Dump = {}
    for metric in cache.metrics():
        kind = cache._kinds[metric]
        dump[metric] = {
            str(key): list(zip(*(list(a) for a in s.ring.chronological()), strict=True))
            for key, s in kind.series.items()
        }
    col.close()
    return dump, dict(errors.counts), sums


IMPLS = [pytest.param(False, id="c", marks=pytest.mark.native), pytest.param(True, id="python")]


@pytest.mark.parametrize("force_python", IMPLS)
@pytest.mark.parametrize("seed", range(6))
def test_fast_path_equals_the_loop(
    host_tree: Any, seed: int, force_python: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The column sweep, in C over the C reader's buffers or in Python over the pure-Python reader's lists,
    gives what the loop gives."""
    steps = scenario(seed)
    taken = 0
    real = podcolumns.Columns.sweep

    def counting(self: podcolumns.Columns, *args: Any) -> Any:
        nonlocal taken
        out = real(self, *args)
        taken += out is not None
        return out

    monkeypatch.setattr(podcolumns.Columns, "sweep", counting)
    fast = run(host_tree, steps, seed, force_python=force_python)
    assert taken >= 5  # the fast path did run, not only the loop
    monkeypatch.setattr(podcolumns.Columns, "sweep", lambda *_a: None)
    loop = run(host_tree, steps, seed, force_python=force_python)
    assert fast[0] == loop[0]
    assert fast[1] == loop[1]
    assert fast[2] == loop[2]
    assert fast[0][api.POD_CPU_USAGE]  # rates were produced at all


def run_churn(
    fh: Any, seed: int, *, force_python: bool = False
) -> tuple[Dump, dict[tuple[str, str], int], list[float]]:
    """Ten pods coming and going, restarting their container (a new ID) and being re-listed unchanged
    (a new object, the same dirs), two containers each, over 30 sweeps."""
    rng = random.Random(seed)
    clock = FakeClock()
    cache = MetricCache(clock=clock, wall_clock=clock.wall)
    errors = RecordingErrors()
    shared = fw.SharedState()
    gen = dict.fromkeys(range(1, 11), 0)

    def pod(i: int) -> api.PodInfo:
        ids = [container_id(1000 * gen[i] + 10 * i + k) for k in range(2)]
        return make_pod(f"pod-{i}", uid=pod_uid(i), containers=2, container_ids=ids)

    live = {i: pod(i) for i in range(1, 8)}
    states = FakeStates()
    col = make(fh, cache, states, clock, errors, shared, force_python=force_python)
    counters: dict[str, int] = {}
    made: dict[tuple[str, ...], list[str]] = {}
    sums: list[float] = []
    for _ in range(30):
        for i in range(1, 11):
            r = rng.random()
            if r < 0.08:
                if live.pop(i, None) is None:
                    live[i] = pod(i)
            elif r < 0.14 and i in live:
                gen[i] += 1
                live[i] = pod(i)
            elif r < 0.2 and i in live:
                live[i] = pod(i)
        states.pod_list = list(live.values())
        for p in live.values():
            key = (p.uid, *(c.container_id for c in p.containers))
            if key not in made:
                made[key] = [fh.pod_cgroup(p.uid), *(fh.container_cgroup(p.uid, c) for c in key[1:])]
            for d in made[key]:
                counters[d] = counters.get(d, 0) + rng.randint(0, 10**9)
                set_usage(fh, d, cpu_ns=counters[d], anon=rng.randint(0, 10**9), periods=counters[d] // 10**8)
        col.collect()
        got = shared.get(fw.PODS_CPU)
        sums.append(-1.0 if got is None else got.value)
        clock.advance(1.0)
    dump: Dump = {}
    for metric in cache.metrics():
        dump[metric] = {
            str(key): list(zip(*(list(a) for a in s.ring.chronological()), strict=True))
            for key, s in cache._kinds[metric].series.items()
        }
    assert col.updates >= 5  # the churn was followed in place, not only by rebuilds
    col.close()
    return dump, dict(errors.counts), sums


@pytest.mark.parametrize("force_python", IMPLS)
@pytest.mark.parametrize("seed", range(3))
def test_churn_followed_in_place_equals_a_rebuild(
    host_tree: Any, seed: int, force_python: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader and the plan following pods coming and going in place give the samples a new reader
    and plan built at each change give (the column sweep giving the new targets' first samples)."""
    with_new = 0
    real = podcolumns.Columns.sweep

    def counting(self: podcolumns.Columns, *args: Any) -> Any:
        nonlocal with_new
        fresh = bool(self.fresh)
        out = real(self, *args)
        with_new += fresh and out is not None
        return out

    monkeypatch.setattr(podcolumns.Columns, "sweep", counting)
    in_place = run_churn(host_tree, seed, force_python=force_python)
    assert with_new >= 3

    def rebuild(col: PodResourceCollector, _reader: Any, _gone: Any, fresh: Any) -> None:
        col._rebuild([t for e in col._pods.values() for t in e.targets], fresh)
        col.updates += 1

    monkeypatch.setattr(PodResourceCollector, "_update", rebuild)
    rebuilt = run_churn(host_tree, seed, force_python=force_python)
    assert in_place[0] == rebuilt[0]
    assert in_place[1] == rebuilt[1]
    # the plans list the pods in different orders: their sums differ in the last bits only
    assert in_place[2] == pytest.approx(rebuilt[2], rel=1e-12)
    assert in_place[0][api.CONTAINER_CPU_USAGE]
