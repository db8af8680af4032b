"""PodResourceCollector on FakeHost trees, v1 and v2: CPU, memory, throttling, resets, gone dirs, fds."""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor import podcolumns, targets
from koordlet.metricsadvisor.podresource import PodResourceCollector, PodResourceConfig
from koordlet.system import native
from koordlet.system.batchread import BatchReader
from koordlet.system.cgroups import CgroupMode
from koordlet.testing import FakeClock, FakeStates, container_id, make_pod, pod_uid
from tests.support.counting import count_series_lookups
from tests.support.podsweep import make, set_usage
from tests.support.recording import RecordingErrors
from tests.unit.koordlet.metricsadvisor.conftest import make_host


def by_label(cache: MetricCache, metric: str, label: str) -> dict[str, float]:
    return {labels[label]: v for labels, _t, v in cache.latest(metric)}


@pytest.mark.parametrize("force_python", [False, True])
def test_cpu_memory_and_throttling_by_hand(
    host_tree: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors, force_python: bool
) -> None:
    fh = host_tree
    p = make_pod("pod-1", uid=pod_uid(1), container_ids=[container_id(7)])
    pdir = fh.pod_cgroup(p.uid)
    cdir = fh.container_cgroup(p.uid, "containerd://" + container_id(7))
    set_usage(
        fh,
        pdir,
        cpu_ns=10_000_000_000,
        anon=100,
        inactive=20,
        unevictable=3,
        periods=100,
        throttled=10,
        file=5000,
    )
    set_usage(fh, cdir, cpu_ns=4_000_000_000, anon=50, inactive=5, unevictable=1, periods=100, throttled=0)
    shared = fw.SharedState()
    col = make(fh, cache, FakeStates(pods=[p]), fake_clock, errors, shared, force_python=force_python)
    col.collect()
    assert cache.latest(api.POD_CPU_USAGE) == []  # baseline round
    assert by_label(cache, api.POD_MEMORY_USAGE, "pod_uid") == {p.uid: 123.0}  # memory needs no baseline
    fake_clock.advance(2.0)
    set_usage(
        fh,
        pdir,
        cpu_ns=13_000_000_000,
        anon=200,
        inactive=20,
        unevictable=3,
        periods=150,
        throttled=35,
        file=9000,
    )
    set_usage(fh, cdir, cpu_ns=5_000_000_000, anon=60, inactive=5, unevictable=1, periods=100, throttled=0)
    col.collect()
    assert by_label(cache, api.POD_CPU_USAGE, "pod_uid") == {p.uid: pytest.approx(1.5)}  # 3 s of CPU in 2 s
    assert by_label(cache, api.CONTAINER_CPU_USAGE, "container_id") == {container_id(7): pytest.approx(0.5)}
    # page cache (active_file/inactive_file) is not part of koordlet's memory usage
    assert by_label(cache, api.POD_MEMORY_USAGE, "pod_uid") == {p.uid: 223.0}
    assert by_label(cache, api.CONTAINER_MEMORY_USAGE, "container_id") == {container_id(7): 66.0}
    assert by_label(cache, api.POD_CPU_THROTTLED, "pod_uid") == {p.uid: pytest.approx(25 / 50)}
    # no period elapsed: 0, as koordlet
    assert by_label(cache, api.CONTAINER_CPU_THROTTLED, "container_id") == {container_id(7): 0.0}
    pods_cpu = shared.get(fw.PODS_CPU)
    assert pods_cpu is not None and pods_cpu.value == pytest.approx(1.5)
    assert col.has_synced()
    assert not errors.counts
    col.close()
    assert col.open_fds() == 0


def test_counter_reset_is_discarded_and_rebaselined(
    host_tree: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fh = host_tree
    p = make_pod("pod-2", uid=pod_uid(2), containers=0)
    pdir = fh.pod_cgroup(p.uid)
    set_usage(fh, pdir, cpu_ns=9_000_000_000, periods=10, throttled=5)
    col = make(fh, cache, FakeStates(pods=[p]), fake_clock, errors)
    col.collect()
    fake_clock.advance(1.0)
    set_usage(fh, pdir, cpu_ns=1_000_000, periods=1, throttled=0)  # cpuacct.usage written 0, cgroup recreated
    col.collect()
    assert cache.latest(api.POD_CPU_USAGE) == []
    assert cache.latest(api.POD_CPU_THROTTLED) == []
    assert errors.kind(fw.ERR_COUNTER_RESET) == 2
    fake_clock.advance(1.0)
    set_usage(fh, pdir, cpu_ns=251_000_000, periods=11, throttled=1)
    col.collect()
    assert by_label(cache, api.POD_CPU_USAGE, "pod_uid") == {p.uid: pytest.approx(0.25)}
    assert by_label(cache, api.POD_CPU_THROTTLED, "pod_uid") == {p.uid: pytest.approx(0.1)}


def test_pod_without_cgroup_gives_no_sample_and_no_fd(
    host_tree: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fh = host_tree
    here, missing = (
        make_pod("pod-3", uid=pod_uid(3), containers=0),
        make_pod("pod-4", uid=pod_uid(4), containers=0),
    )
    set_usage(fh, fh.pod_cgroup(here.uid), cpu_ns=0, anon=1)
    col = make(fh, cache, FakeStates(pods=[here, missing]), fake_clock, errors)
    col.collect()
    assert set(by_label(cache, api.POD_MEMORY_USAGE, "pod_uid")) == {here.uid}
    assert errors.kind(fw.ERR_GONE) == 1
    files_per_pod = 2 if fh.mode is CgroupMode.V2 else 3
    assert col.open_fds() == files_per_pod


def test_vanished_cgroup_gives_no_sample_never_zero(
    host_tree: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fh = host_tree
    a, b, c = (
        make_pod("pod-5", uid=pod_uid(5), containers=0),
        make_pod("pod-6", uid=pod_uid(6), containers=0),
        make_pod("pod-7", uid=pod_uid(7), containers=0),
    )
    adir, bdir = fh.pod_cgroup(a.uid), fh.pod_cgroup(b.uid)
    set_usage(fh, adir, cpu_ns=0, anon=10)
    set_usage(fh, bdir, cpu_ns=0, anon=20)
    states = FakeStates(pods=[a, b])
    col = make(fh, cache, states, fake_clock, errors)
    col.collect()
    fake_clock.advance(1.0)
    # b's cgroup is removed while the informer still lists it. The kernel answers ENODEV on a held
    # descriptor of a removed cgroup; a regular file stays readable through one, so here more new pods
    # arrive than stay and the reader is built anew, opening every path.
    for sub in ("cpu", "cpuacct", "memory", "cpuset", "blkio", "net_cls", "perf_event", ""):
        target = fh.paths.cgroup_root / sub / bdir if sub else fh.paths.cgroup_root / bdir
        if target.is_dir():
            shutil.rmtree(target)
    d, e = make_pod("pod-8", uid=pod_uid(8), containers=0), make_pod("pod-9", uid=pod_uid(9), containers=0)
    for p in (c, d, e):
        set_usage(fh, fh.pod_cgroup(p.uid), cpu_ns=0, anon=30)
    set_usage(fh, adir, cpu_ns=500_000_000, anon=10)
    states.pod_list = [a, b, c, d, e]
    col.collect()
    assert by_label(cache, api.POD_CPU_USAGE, "pod_uid") == {a.uid: pytest.approx(0.5)}
    newest = {labels["pod_uid"]: t for labels, t, _v in cache.latest(api.POD_MEMORY_USAGE)}
    assert newest[b.uid] < fake_clock()  # b kept only its old sample: nothing (and no zero) this round
    assert errors.kind(fw.ERR_GONE) == 1
    files_per_pod = 2 if fh.mode is CgroupMode.V2 else 3
    assert col.open_fds() == 4 * files_per_pod


def test_pod_leaving_the_informer_closes_its_descriptors(
    host_tree: Any,
    cache: MetricCache,
    fake_clock: FakeClock,
    errors: RecordingErrors,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fh = host_tree
    pods = [
        make_pod(f"pod-{10 + i}", uid=pod_uid(10 + i), container_ids=[container_id(100 + i)])
        for i in range(3)
    ]
    for p in pods:
        set_usage(fh, fh.pod_cgroup(p.uid), cpu_ns=0)
        set_usage(fh, fh.container_cgroup(p.uid, "containerd://" + p.containers[0].container_id), cpu_ns=0)
    states = FakeStates(pods=pods)
    col = make(fh, cache, states, fake_clock, errors)
    col.collect()
    per_dir = 2 if fh.mode is CgroupMode.V2 else 3
    assert col.open_fds() == 6 * per_dir
    opened: list[int] = []
    real_open = native.open_batch_reader

    def counting_open(*a: Any, **kw: Any) -> BatchReader:
        opened.append(1)
        return real_open(*a, **kw)

    monkeypatch.setattr(native, "open_batch_reader", counting_open)
    col.collect()
    assert opened == []  # unchanged pod set: same reader, same descriptors
    states.pod_list = list(pods[:1])
    col.collect()
    assert col.open_fds() == 2 * per_dir
    assert {t.ident for t in col.targets()} == {pods[0].uid, pods[0].containers[0].container_id}


def test_malformed_memory_stat_skips_only_that_series(
    host_tree: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fh = host_tree
    good, bad = (
        make_pod("pod-20", uid=pod_uid(20), containers=0),
        make_pod("pod-21", uid=pod_uid(21), containers=0),
    )
    set_usage(fh, fh.pod_cgroup(good.uid), cpu_ns=0, anon=7)
    bdir = fh.pod_cgroup(bad.uid)
    set_usage(fh, bdir, cpu_ns=0, anon=9)
    fh.write_cgroup(
        "memory.stat", bdir, "total_active_anon 12x\n" if fh.mode is CgroupMode.V1 else "anon 3\n"
    )
    col = make(fh, cache, FakeStates(pods=[good, bad]), fake_clock, errors)
    col.collect()
    assert by_label(cache, api.POD_MEMORY_USAGE, "pod_uid") == {good.uid: 7.0}
    assert errors.kind(fw.ERR_MALFORMED) == 1
    fake_clock.advance(1.0)
    col.collect()
    assert set(by_label(cache, api.POD_CPU_USAGE, "pod_uid")) == {good.uid, bad.uid}  # CPU unaffected


def test_malformed_cpu_counter_is_counted(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    p = make_pod("pod-22", uid=pod_uid(22), containers=0)
    pdir = fake_host.pod_cgroup(p.uid)
    set_usage(fake_host, pdir, cpu_ns=0, anon=1)
    fake_host.write_cgroup("cpuacct.usage", pdir, "garbage")
    col = make(fake_host, cache, FakeStates(pods=[p]), fake_clock, errors)
    col.collect()
    assert errors.kind(fw.ERR_MALFORMED) == 1
    assert by_label(cache, api.POD_MEMORY_USAGE, "pod_uid") == {p.uid: 1.0}


def test_unsafe_pod_uid_is_refused_before_any_path(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    evil = api.PodInfo(
        uid="../../etc", namespace="x", name="y", qos=api.QOSClass.BE, kube_qos=api.KubeQOSClass.BESTEFFORT
    )
    col = make(fake_host, cache, FakeStates(pods=[evil]), fake_clock, errors)
    col.collect()
    assert errors.kind(fw.ERR_UNSAFE_PATH) == 1
    assert col.targets() == []


def test_rate_above_capacity_is_discarded(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    p = make_pod("pod-23", uid=pod_uid(23), containers=0)
    pdir = fake_host.pod_cgroup(p.uid)
    set_usage(fake_host, pdir, cpu_ns=0)
    shared = fw.SharedState()
    shared.set(fw.CPU_COUNT, 0.0, 2.0)
    col = make(fake_host, cache, FakeStates(pods=[p]), fake_clock, errors, shared)
    col.collect()
    fake_clock.advance(1.0)
    set_usage(fake_host, pdir, cpu_ns=5_000_000_000)
    col.collect()
    assert cache.latest(api.POD_CPU_USAGE) == []
    assert errors.kind(fw.ERR_OVER_CAPACITY) == 1


def test_container_dir_comes_from_the_layout_when_not_given(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    p = make_pod(
        "pod-24", kube_qos=api.KubeQOSClass.BURSTABLE, uid=pod_uid(24), container_ids=[container_id(9)]
    )
    cdir = fake_host.container_cgroup(
        p.uid, "containerd://" + container_id(9), qos=api.KubeQOSClass.BURSTABLE
    )
    assert cdir.endswith(f"burstable/pod{pod_uid(24)}/{container_id(9)}")
    set_usage(fake_host, fake_host.pod_cgroup(p.uid, api.KubeQOSClass.BURSTABLE), cpu_ns=0, anon=1)
    set_usage(fake_host, cdir, cpu_ns=0, anon=2)
    col = make(fake_host, cache, FakeStates(pods=[p]), fake_clock, errors)
    col.collect()
    assert by_label(cache, api.CONTAINER_MEMORY_USAGE, "container_id") == {container_id(9): 2.0}


def test_memory_hierarchy_gone_keeps_the_cpu_series(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    # v1 teardown removes one hierarchy before another: what is still readable stays valid
    p = make_pod("pod-30", uid=pod_uid(30), containers=0)
    pdir = fake_host.pod_cgroup(p.uid)
    set_usage(fake_host, pdir, cpu_ns=0, anon=5)
    states = FakeStates(pods=[p])
    col = make(fake_host, cache, states, fake_clock, errors)
    col.collect()
    shutil.rmtree(fake_host.paths.cgroup_root / "memory" / pdir)
    # more new pods than old force a reader rebuild, so the removed file is reopened (ENOENT) rather than
    # re-read through its descriptor (the kernel answers ENODEV there; a regular file reads on)
    q = make_pod("pod-31", uid=pod_uid(31), containers=0)
    r = make_pod("pod-32", uid=pod_uid(32), containers=0)
    set_usage(fake_host, fake_host.pod_cgroup(q.uid), cpu_ns=0, anon=1)
    set_usage(fake_host, fake_host.pod_cgroup(r.uid), cpu_ns=0, anon=1)
    fake_clock.advance(1.0)
    fake_host.write_cgroup("cpuacct.usage", pdir, "250000000")
    states.pod_list = [p, q, r]
    col.collect()
    assert by_label(cache, api.POD_CPU_USAGE, "pod_uid") == {p.uid: pytest.approx(0.25)}
    mem_t = {labels["pod_uid"]: t for labels, t, _v in cache.latest(api.POD_MEMORY_USAGE)}
    assert mem_t[p.uid] < fake_clock()  # no memory sample this round, and no zero
    assert errors.kind(fw.ERR_FILE_MISSING) == 1
    assert errors.kind(fw.ERR_GONE) == 0


def test_collect_after_close_is_a_no_op(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    p = make_pod("pod-40", uid=pod_uid(40), containers=0)
    set_usage(fake_host, fake_host.pod_cgroup(p.uid), cpu_ns=0, anon=3)
    col = make(fake_host, cache, FakeStates(pods=[p]), fake_clock, errors)
    col.close()
    col.collect()  # the daemon shuts components down before joining their threads
    assert col.open_fds() == 0
    assert cache.latest(api.POD_MEMORY_USAGE) == []


@pytest.mark.parametrize("force_python", [False, True])
def test_a_pod_coming_and_going_keeps_the_reader_and_the_other_descriptors(
    host_tree: Any,
    cache: MetricCache,
    fake_clock: FakeClock,
    errors: RecordingErrors,
    monkeypatch: pytest.MonkeyPatch,
    force_python: bool,
) -> None:
    """A pod replaced (churn) built a new reader over every pod's files, reopening thousands of them. The
    reader now follows the change in place: only the new pod's files are opened, the others keep their
    descriptors, and the samples are those a fresh reader gives."""
    fh = host_tree
    pods = [
        make_pod(f"pod-{50 + i}", uid=pod_uid(50 + i), container_ids=[container_id(500 + i)])
        for i in range(6)
    ]
    for p in pods:
        set_usage(fh, fh.pod_cgroup(p.uid), cpu_ns=0, anon=1)
        set_usage(fh, fh.container_cgroup(p.uid, "containerd://" + p.containers[0].container_id), cpu_ns=0)
    states = FakeStates(pods=pods[:5])
    col = PodResourceCollector(
        PodResourceConfig(1.0, force_python=force_python),
        fw.Options(
            cache=cache,
            clock=fake_clock,
            errors=errors,
            host=make_host(fh),
            states=states,
            shared=fw.SharedState(),
        ),
    )
    col.collect()
    opened: list[str] = []
    real_open = os.open

    def counting_open(path: Any, *a: Any, **kw: Any) -> int:
        opened.append(str(path))
        return int(real_open(path, *a, **kw))

    monkeypatch.setattr(os, "open", counting_open)
    held = col.open_fds()
    # pod 0 goes, pod 5 comes (the C reader opens in C, unseen here: its count of held files stands in)
    states.pod_list = [*pods[1:5], pods[5]]
    fake_clock.advance(1.0)
    for p in pods[1:]:
        set_usage(fh, fh.pod_cgroup(p.uid), cpu_ns=100_000_000, anon=2)
    col.collect()
    assert col.rebuilds == 1 and col.updates == 1
    per_dir = 2 if fh.mode is CgroupMode.V2 else 3
    assert col.open_fds() == held == 10 * per_dir
    if force_python:
        assert len(opened) == 2 * per_dir  # the new pod's and its container's files only
    want = {p.uid for p in pods[1:5]}  # pod 5 has its baseline only
    assert set(by_label(cache, api.POD_CPU_USAGE, "pod_uid")) >= want
    assert {t.ident for t in col.targets()} == {p.uid for p in pods[1:]} | {
        p.containers[0].container_id for p in pods[1:]
    }
    fake_clock.advance(1.0)
    for p in pods[1:]:
        set_usage(fh, fh.pod_cgroup(p.uid), cpu_ns=300_000_000, anon=3)
    col.collect()
    got = by_label(cache, api.POD_CPU_USAGE, "pod_uid")
    assert {uid: round(v, 3) for uid, v in got.items()} == {p.uid: 0.2 for p in pods[1:]}
    assert by_label(cache, api.POD_MEMORY_USAGE, "pod_uid")[pods[5].uid] == 3.0


def pods_with_cgroups(fh: Any, n: int) -> list[api.PodInfo]:
    """``n`` pods of one container each, their cgroups made (no usage yet)."""
    pods = [make_pod(f"pod-{i}", uid=pod_uid(i), container_ids=[container_id(i)]) for i in range(1, n + 1)]
    for p in pods:
        set_usage(fh, fh.pod_cgroup(p.uid), cpu_ns=0)
        set_usage(fh, fh.container_cgroup(p.uid, "containerd://" + p.containers[0].container_id), cpu_ns=0)
    return pods


def test_one_pod_replaced_among_many_costs_a_few_plan_entries(
    host_tree: Any,
    cache: MetricCache,
    fake_clock: FakeClock,
    errors: RecordingErrors,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pod replaced among 300 worked out the targets of every pod, built a new plan entry for each and
    sent the next sweep target by target (together most of the sweep's CPU beyond the reads at 1000 pods
    under churn): now the work is that of the pods that changed, and the sweep stays on whole columns."""
    fh = host_tree
    pods = pods_with_cgroups(fh, 301)
    states = FakeStates(pods=pods[:300])
    col = make(fh, cache, states, fake_clock, errors)
    col.collect()
    fake_clock.advance(1.0)
    col.collect()
    built = {"plan": 0, "target": 0, "checked sweeps": 0}

    def counting(name: str, real: Any) -> Any:
        def make_one(*a: Any, **kw: Any) -> Any:
            built[name] += 1
            return real(*a, **kw)

        return make_one

    monkeypatch.setattr(podcolumns, "Plan", counting("plan", podcolumns.Plan))
    monkeypatch.setattr(targets, "Target", counting("target", targets.Target))
    checked = podcolumns.Columns.sweep_checked
    monkeypatch.setattr(podcolumns.Columns, "sweep_checked", counting("checked sweeps", checked))
    states.pod_list = [*pods[1:150], pods[300], *pods[150:300]]  # pod 0 goes, pod 300 comes
    fake_clock.advance(1.0)
    col.collect()
    assert col.updates == 1
    assert built["target"] == 2  # the new pod's and its container's
    assert built["plan"] <= 12  # theirs and those of the few targets moved to keep the reader dense
    assert built["checked sweeps"] == 0  # the column sweep, the new pod's memory only (no rate yet)
    assert set(by_label(cache, api.POD_CPU_USAGE, "pod_uid")) >= {p.uid for p in pods[1:300]}
    assert pods[300].uid not in by_label(cache, api.POD_CPU_USAGE, "pod_uid")
    assert pods[300].uid in by_label(cache, api.POD_MEMORY_USAGE, "pod_uid")
    assert {t.ident for t in col.targets()} == {p.uid for p in pods[1:]} | {
        p.containers[0].container_id for p in pods[1:]
    }


@pytest.mark.native
def test_a_steady_sweep_turns_no_read_value_into_a_python_int(
    host_tree: Any,
    cache: MetricCache,
    fake_clock: FakeClock,
    errors: RecordingErrors,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every sweep unpacked the whole read (six ints a target) and did its arithmetic in Python, about as
    much CPU as the reads at 100 pods: now a steady sweep is one C call over the reader's buffers, and
    only a sweep the checked path takes (the baseline round, a malformed or gone file) unpacks the read."""
    fh = host_tree
    pods = pods_with_cgroups(fh, 20)
    states = FakeStates(pods=pods)
    col = make(fh, cache, states, fake_clock, errors)
    unpacked = 0
    real = native.NativeBatchReader.results

    def counting(reader: native.NativeBatchReader) -> Any:
        nonlocal unpacked
        unpacked += 1
        return real(reader)

    monkeypatch.setattr(native.NativeBatchReader, "results", counting)
    col.collect()
    assert unpacked == 1  # the baseline round: target by target
    for _ in range(5):
        fake_clock.advance(1.0)
        col.collect()
    assert unpacked == 1
    assert len(by_label(cache, api.POD_CPU_USAGE, "pod_uid")) == 20
    fh.write_cgroup("memory.stat", fh.pod_cgroup(pods[3].uid), "total_active_anon x\nactive_anon x\n")
    fake_clock.advance(1.0)
    col.collect()
    assert unpacked == 2  # a malformed file: the checked sweep tells which series to skip
    assert errors.kind(fw.ERR_MALFORMED) == 1


def test_one_pod_replaced_among_many_costs_the_cache_the_changed_keys_only(
    host_tree: Any,
    cache: MetricCache,
    fake_clock: FakeClock,
    errors: RecordingErrors,
) -> None:
    """After a pod of 300 is replaced, the sweeps' keys differ from the last ones in a few places (where
    the pod was, the ends of the groups): the cache looked every key of six kinds up again, twice (the
    new pod gets its rates a sweep later); now it looks up the changed ones."""
    fh = host_tree
    pods = pods_with_cgroups(fh, 301)
    states = FakeStates(pods=pods[:300])
    col = make(fh, cache, states, fake_clock, errors)
    for _ in range(3):
        col.collect()
        fake_clock.advance(1.0)
    lookups = count_series_lookups(cache)
    states.pod_list = [*pods[1:150], pods[300], *pods[150:300]]  # pod 0 goes, pod 300 comes
    for _ in range(3):
        col.collect()
        fake_clock.advance(1.0)
    assert col.updates == 1
    assert lookups.n <= 6 * 2 * 4  # per kind and sweep: a few places, never all 300
    assert set(by_label(cache, api.POD_CPU_USAGE, "pod_uid")) >= {p.uid for p in pods[1:]}
    cpu = cache.query(api.POD_CPU_USAGE, window=2.5, agg="count", labels={"pod_uid": pods[300].uid})
    assert cpu is not None and cpu.count == 2  # rates from its second sweep on
    gone = cache.query(api.POD_MEMORY_USAGE, window=2.5, agg="count", labels={"pod_uid": pods[0].uid})
    assert gone is None


def test_reading_the_sweeps_files_alone_publishes_nothing(
    host_tree: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fh = host_tree
    p = make_pod("pod-1", uid=pod_uid(1), container_ids=[container_id(7)])
    set_usage(fh, fh.pod_cgroup(p.uid), cpu_ns=1_000_000_000, anon=100)
    col = make(fh, cache, FakeStates(pods=[p]), fake_clock, errors)
    assert not col.read_sweep_files(), "nothing opened before the first sweep"
    col.collect()
    before = cache.latest(api.POD_MEMORY_USAGE)
    set_usage(fh, fh.pod_cgroup(p.uid), cpu_ns=2_000_000_000, anon=900)
    fake_clock.advance(1.0)
    assert col.read_sweep_files()
    assert cache.latest(api.POD_MEMORY_USAGE) == before, "the floor read stores nothing"
    col.collect()
    assert by_label(cache, api.POD_MEMORY_USAGE, "pod_uid") == {p.uid: 900.0}
    col.close()
