"""HostApplicationCollector: by cgroup dir (given or koordlet's default) or by process name."""

from __future__ import annotations

from typing import Any

import pytest

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.hostapp import (
    HostAppConfig,
    HostApplicationCollector,
    ProcSample,
    app_cgroup_dir,
)
from koordlet.testing import FakeClock, FakeStates
from tests.support.recording import FakeProcesses, RecordingErrors
from tests.unit.koordlet.metricsadvisor.conftest import make_host


def by_app(cache: MetricCache, metric: str) -> dict[str, float]:
    return {labels["host_app_name"]: v for labels, _t, v in cache.latest(metric)}


def make(
    fh: Any,
    cache: MetricCache,
    states: FakeStates,
    clock: FakeClock,
    errors: RecordingErrors,
    procs: FakeProcesses,
    shared: fw.SharedState,
) -> HostApplicationCollector:
    return HostApplicationCollector(
        HostAppConfig(1.0),
        fw.Options(cache=cache, clock=clock, errors=errors, host=make_host(fh), states=states, shared=shared),
        processes=procs,
    )


def test_cgroup_and_process_apps_by_hand(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    given = api.HostApplication(
        name="nginx",
        qos=api.QOSClass.LS,
        cgroup_base="CgroupRoot",
        cgroup_parent_dir="system.slice",
        cgroup_relative_path="nginx.service",
    )
    default = api.HostApplication(name="batchd", qos=api.QOSClass.BE)
    by_name = api.HostApplication(name="agentx", qos=api.QOSClass.LS)
    fake_host.mkcgroup(None, "system.slice/nginx.service")
    fake_host.mkcgroup(None, "host-best-effort/batchd")
    fake_host.write_cgroup("cpuacct.usage", "system.slice/nginx.service", "1000000000")
    fake_host.write_memory_stat("system.slice/nginx.service", active_anon=100, inactive_anon=1, unevictable=2)
    fake_host.write_cgroup("cpuacct.usage", "host-best-effort/batchd", "0")
    fake_host.write_memory_stat("host-best-effort/batchd", active_anon=7)
    procs = FakeProcesses()
    procs.procs = [
        ProcSample(100, 1.0, "agentx", 10.0, 1000),
        ProcSample(101, 2.0, "agentx", 5.0, 500),
        ProcSample(102, 2.0, "other", 99.0, 99),
    ]
    states = FakeStates(slo=api.NodeSLO(host_applications=(given, default, by_name)))
    shared = fw.SharedState()
    col = make(fake_host, cache, states, fake_clock, errors, procs, shared)
    col.collect()
    assert by_app(cache, api.HOST_APP_MEMORY_USAGE) == {"nginx": 103.0, "batchd": 7.0, "agentx": 1500.0}
    assert cache.latest(api.HOST_APP_CPU_USAGE) == []
    fake_clock.advance(2.0)
    fake_host.write_cgroup("cpuacct.usage", "system.slice/nginx.service", "2000000000")
    fake_host.write_cgroup("cpuacct.usage", "host-best-effort/batchd", "3000000000")
    # pid 101 exited and its pid was reused by a new agentx: its counter restarts, which is no reset
    procs.procs = [ProcSample(100, 1.0, "agentx", 11.0, 1000), ProcSample(101, 50.0, "agentx", 0.5, 10)]
    col.collect()
    cpu = by_app(cache, api.HOST_APP_CPU_USAGE)
    assert cpu == {"nginx": pytest.approx(0.5), "batchd": pytest.approx(1.5), "agentx": pytest.approx(0.5)}
    total = shared.get(fw.HOST_APPS_CPU)
    assert total is not None and total.value == pytest.approx(2.5)
    assert errors.kind(fw.ERR_COUNTER_RESET) == 0
    assert col.has_synced()


def test_app_not_running_gives_no_sample(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    states = FakeStates(slo=api.NodeSLO(host_applications=(api.HostApplication(name="ghost"),)))
    col = make(fake_host, cache, states, fake_clock, errors, FakeProcesses(), fw.SharedState())
    col.collect()
    fake_clock.advance(1.0)
    col.collect()
    assert cache.latest(api.HOST_APP_CPU_USAGE) == []
    assert cache.latest(api.HOST_APP_MEMORY_USAGE) == []


def test_given_cgroup_that_is_gone_counts_and_gives_nothing(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    app = api.HostApplication(name="x", cgroup_relative_path="nope/x")
    states = FakeStates(slo=api.NodeSLO(host_applications=(app,)))
    make(fake_host, cache, states, fake_clock, errors, FakeProcesses(), fw.SharedState()).collect()
    assert errors.kind(fw.ERR_GONE) == 1
    assert cache.latest(api.HOST_APP_MEMORY_USAGE) == []


def test_unsafe_cgroup_path_is_refused(fake_host: Any) -> None:
    from koordlet.api.errors import UnsafePath

    host = make_host(fake_host)
    with pytest.raises(UnsafePath):
        app_cgroup_dir(host, api.HostApplication(name="x", cgroup_relative_path="../../etc"))
    with pytest.raises(UnsafePath):
        app_cgroup_dir(host, api.HostApplication(name="x", cgroup_base="Elsewhere", cgroup_relative_path="a"))
    assert app_cgroup_dir(
        host, api.HostApplication(name="x", cgroup_base="KubepodsBesteffort", cgroup_relative_path="a")
    ) == ("kubepods/besteffort/a", True)


def test_v2_cgroup_app_reads_usage_usec_and_memory_stat(
    fake_host: Any, cache: MetricCache, fake_clock: FakeClock, errors: RecordingErrors
) -> None:
    fh = fake_host.use_cgroup_v2()
    app = api.HostApplication(name="db", qos=api.QOSClass.LS)
    fh.mkcgroup(None, "host-latency-sensitive/db")
    fh.write_cgroup("cpu.stat", "host-latency-sensitive/db", "usage_usec 1000000\nuser_usec 0\n")
    fh.write_memory_stat(
        "host-latency-sensitive/db", active_anon=300, inactive_anon=20, unevictable=1, active_file=9
    )
    states = FakeStates(slo=api.NodeSLO(host_applications=(app,)))
    col = make(fh, cache, states, fake_clock, errors, FakeProcesses(), fw.SharedState())
    col.collect()
    fake_clock.advance(4.0)
    fh.write_cgroup("cpu.stat", "host-latency-sensitive/db", "usage_usec 3000000\nuser_usec 0\n")
    col.collect()
    assert by_app(cache, api.HOST_APP_CPU_USAGE) == {"db": pytest.approx(0.5)}
    assert by_app(cache, api.HOST_APP_MEMORY_USAGE) == {"db": 321.0}
    assert not errors.counts
