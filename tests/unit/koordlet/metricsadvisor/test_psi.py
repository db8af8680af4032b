"""PSICollector: node PSI from /proc/pressure, pod PSI only where cgroup pressure files exist."""

from __future__ import annotations

from typing import Any

import pytest

from koordlet.api.metrics import CONTAINER_PSI, NODE_PSI, POD_PSI, POD_PSI_CPU_FULL_SUPPORTED
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.psi import PSICollector, PSIConfig
from koordlet.testing import FakeClock, FakeStates, container_id, make_pod, pod_uid
from tests.support.fds import open_fds_under
from tests.support.recording import RecordingErrors
from tests.unit.koordlet.metricsadvisor.conftest import make_host


def make(
    fh: Any, cache: MetricCache, states: FakeStates, clock: FakeClock, errors: RecordingErrors
) -> PSICollector:
    return PSICollector(
        PSIConfig(10.0),
        fw.Options(cache=cache, clock=clock, errors=errors, host=make_host(fh), states=states),
    )


def series(cache: MetricCache, metric: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(labels.items())): v for labels, _t, v in cache.latest(metric)}


def test_node_psi_all_windows_and_degrees(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fake_host.write_pressure("proc/pressure/cpu", (1.5, 2.5, 3.5, 100))  # no full line (kernel < 5.13)
    fake_host.write_pressure("proc/pressure/memory", (0.1, 0.2, 0.3, 10), (0.01, 0.02, 0.03, 5))
    fake_host.write_pressure("proc/pressure/io", (4.0, 5.0, 6.0, 1), (7.0, 8.0, 9.0, 1))
    col = make(fake_host, cache, FakeStates(), fake_clock, errors)
    col.collect()
    got = series(cache, NODE_PSI)
    assert len(got) == 3 + 6 + 6
    key = (("psi_degree", "some"), ("psi_precision", "60"), ("psi_resource", "cpu"))
    assert got[key] == 2.5
    assert got[(("psi_degree", "full"), ("psi_precision", "300"), ("psi_resource", "mem"))] == 0.03
    assert col.has_synced()
    assert not errors.counts


def test_v1_without_cgroup_pressure_skips_pods_silently(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fake_host.write_pressure("proc/pressure/cpu", (1.0, 1.0, 1.0, 1))
    p = make_pod("pod-1", uid=pod_uid(1), containers=0)
    fake_host.pod_cgroup(p.uid)
    col = make(fake_host, cache, FakeStates(pods=[p]), fake_clock, errors)
    col.collect()
    assert not col.pods_supported()
    assert cache.latest(POD_PSI) == []
    assert not errors.counts


def test_no_psi_at_all_is_not_an_error(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    col = make(fake_host, cache, FakeStates(), fake_clock, errors)
    col.collect()
    assert cache.latest(NODE_PSI) == []
    assert not errors.counts


def test_v2_pod_and_container_psi_avg10(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fh = fake_host.use_cgroup_v2()
    p = make_pod("pod-2", uid=pod_uid(2), container_ids=[container_id(5)])
    pdir = fh.pod_cgroup(p.uid)
    cdir = fh.container_cgroup(p.uid, "containerd://" + container_id(5))
    for d, base in ((pdir, 10.0), (cdir, 20.0)):
        fh.write_pressure(f"cgroup/{d}/cpu.pressure", (base, 0, 0, 1), (base + 1, 0, 0, 1))
        fh.write_pressure(f"cgroup/{d}/memory.pressure", (base + 2, 0, 0, 1), (base + 3, 0, 0, 1))
        fh.write_pressure(f"cgroup/{d}/io.pressure", (base + 4, 0, 0, 1), (base + 5, 0, 0, 1))
    col = make(fh, cache, FakeStates(pods=[p]), fake_clock, errors)
    col.collect()
    pods = series(cache, POD_PSI)
    assert len(pods) == 6
    assert (
        pods[(("pod_uid", p.uid), ("psi_degree", "full"), ("psi_precision", "10"), ("psi_resource", "mem"))]
        == 13.0
    )
    conts = series(cache, CONTAINER_PSI)
    assert (
        conts[
            (
                ("container_id", container_id(5)),
                ("pod_uid", p.uid),
                ("psi_degree", "some"),
                ("psi_precision", "10"),
                ("psi_resource", "io"),
            )
        ]
        == 24.0
    )
    assert series(cache, POD_PSI_CPU_FULL_SUPPORTED) == {(("pod_uid", p.uid),): 1.0}


def test_malformed_pressure_file_is_counted(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fake_host.write("proc/pressure/cpu", "some avg10=abc\n")
    fake_host.write_pressure("proc/pressure/io", (1.0, 2.0, 3.0, 4))
    make(fake_host, cache, FakeStates(), fake_clock, errors).collect()
    assert errors.kind(fw.ERR_MALFORMED) == 1
    assert len(cache.latest(NODE_PSI)) == 3


@pytest.mark.parametrize("n", [3])
def test_descriptors_of_gone_pods_are_released(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors, n: int
) -> None:
    fh = fake_host.use_cgroup_v2()
    pods = [make_pod(f"pod-{10 + i}", uid=pod_uid(10 + i), containers=0) for i in range(n)]
    for p in pods:
        d = fh.pod_cgroup(p.uid)
        for stem in ("cpu", "memory", "io"):
            fh.write_pressure(f"cgroup/{d}/{stem}.pressure", (1, 1, 1, 1))
    states = FakeStates(pods=pods)
    col = make(fh, cache, states, fake_clock, errors)
    col.collect()
    before = open_fds_under(fh.root)
    states.pod_list = list(pods[:1])
    col.collect()
    assert open_fds_under(fh.root) == before - 3 * (n - 1)
    col.close()
    assert open_fds_under(fh.root) == 0


def test_v1_kernel_with_cgroup_pressure_in_cpuacct_collects_pods(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    # Anolis patches *.pressure into the v1 cpuacct hierarchy, the root included
    for stem in ("cpu", "memory", "io"):
        fake_host.write_pressure(f"cgroup/cpuacct/{stem}.pressure", (0.0, 0.0, 0.0, 0))
    p = make_pod("pod-3", uid=pod_uid(3), containers=0)
    d = fake_host.pod_cgroup(p.uid)
    fake_host.write_pressure(f"cgroup/cpuacct/{d}/cpu.pressure", (42.0, 0, 0, 1))
    col = make(fake_host, cache, FakeStates(pods=[p]), fake_clock, errors)
    col.collect()
    assert col.pods_supported()
    got = series(cache, POD_PSI)
    assert got == {
        (("pod_uid", p.uid), ("psi_degree", "some"), ("psi_precision", "10"), ("psi_resource", "cpu")): 42.0
    }
    assert series(cache, POD_PSI_CPU_FULL_SUPPORTED) == {(("pod_uid", p.uid),): 0.0}
    assert not errors.counts
