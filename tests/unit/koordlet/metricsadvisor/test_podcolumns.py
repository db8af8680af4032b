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
from koordlet.testing import FakeClock, FakeStates, container_id, make_pod, pod_uid
from tests.support.recording import RecordingErrors
from tests.unit.koordlet.metricsadvisor.test_podresource import make, set_usage

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
    fh: Any, steps: list[dict[str, Any]], seed: int
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
    col = make(fh, cache, states, clock, errors, shared)
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
    dump: Dump = {}
    for metric in cache.metrics():
        kind = cache._kinds[metric]
        dump[metric] = {
            str(key): list(zip(*(list(a) for a in s.ring.chronological()), strict=True))
            for key, s in kind.series.items()
        }
    col.close()
    return dump, dict(errors.counts), sums


@pytest.mark.parametrize("seed", range(6))
def test_fast_path_equals_the_loop(host_tree: Any, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    steps = scenario(seed)
    taken = 0
    real = podcolumns.Columns.sweep

    def counting(self: podcolumns.Columns, *args: Any) -> Any:
        nonlocal taken
        out = real(self, *args)
        taken += out is not None
        return out

    monkeypatch.setattr(podcolumns.Columns, "sweep", counting)
    fast = run(host_tree, steps, seed)
    assert taken >= 5  # the fast path did run, not only the loop
    monkeypatch.setattr(podcolumns.Columns, "sweep", lambda *_a: None)
    loop = run(host_tree, steps, seed)
    assert fast[0] == loop[0]
    assert fast[1] == loop[1]
    assert fast[2] == loop[2]
    assert fast[0][api.POD_CPU_USAGE]  # rates were produced at all
