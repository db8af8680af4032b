"""cgroup, /proc and resctrl files, fuzzed: a parser answers a value or its own InvalidValue (never another
exception); a collector reading a broken file counts it, skips that series only, and keeps sampling."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordlet import api
from koordlet.api.cpulist import parse_cpuset
from koordlet.api.errors import KoordletError
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.noderesource import NodeResourceCollector, NodeResourceConfig
from koordlet.metricsadvisor.podresource import PodResourceCollector, PodResourceConfig
from koordlet.system import blkio, cgstats, procfs, resctrl
from koordlet.system.cgroupvalues import parse_int
from koordlet.testing import FakeClock, FakeStates, make_pod, pod_uid
from tests.support.fakehost import FakeHost
from tests.support.paths import ROOT
from tests.support.recording import RecordingErrors
from tests.support.strategies import text_mutations

FIXTURES = ROOT / "tests" / "fixtures"
MEMORY_STAT = "cache 4096\nrss 8192\ntotal_cache 4096\ntotal_rss 8192\ntotal_active_anon 8192\n"
MEMORY_STAT += "total_inactive_anon 0\ntotal_unevictable 0\ntotal_inactive_file 4096\ntotal_active_file 0\n"
CPU_STAT = "nr_periods 10\nnr_throttled 2\nthrottled_time 1000\nusage_usec 5\nuser_usec 3\nsystem_usec 2\n"

PARSERS: dict[str, tuple[Callable[[str], Any], str]] = {
    "proc/stat": (procfs.parse_proc_stat, (FIXTURES / "proc" / "stat").read_text()),
    "proc/meminfo": (procfs.parse_meminfo, (FIXTURES / "proc" / "meminfo").read_text()),
    "pressure": (procfs.parse_psi, (FIXTURES / "proc" / "pressure" / "cpu").read_text()),
    "memory.stat": (cgstats.parse_memory_stat, MEMORY_STAT),
    "cpu.stat": (cgstats.parse_cpu_stat, CPU_STAT),
    "cpuacct.usage": (cgstats.parse_cpuacct_usage, "123456789\n"),
    "cpu.max usage": (lambda t: cgstats.parse_cpu_usage_ns(t, v2=True), CPU_STAT),
    "cpuset.cpus": (parse_cpuset, "0-3,8,10-11\n"),
    "cfs_quota_us": (lambda t: parse_int("cpu.cfs_quota_us", t.strip()), "-1\n"),
    "schemata": (resctrl.parse_schemata, (FIXTURES / "resctrl" / "schemata").read_text()),
    "tasks": (resctrl.parse_tasks, "1\n2\n3\n"),
    "blkio throttle": (blkio.parse_device_values, "8:0 1048576\n8:16 2097152\n"),
    "io.max": (blkio.parse_io_max, "8:0 rbps=1048576 wbps=max riops=max wiops=100\n"),
}


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_a_parser_answers_or_raises_its_own_error(name: str) -> None:
    parse, valid = PARSERS[name]
    parse(valid)  # the base case parses

    @settings(max_examples=150, deadline=None)
    @given(text_mutations(valid) | st.text(max_size=200))
    def fuzz(text: str) -> None:
        try:
            parse(text)
        except KoordletError:
            pass

    fuzz()


@contextlib.contextmanager
def fresh_host() -> Iterator[tuple[FakeHost, MetricCache, FakeClock, RecordingErrors]]:
    """A FakeHost in a temp dir (one per Hypothesis example) with a cache, a clock and an error sink."""
    with tempfile.TemporaryDirectory() as tmp:
        clock = FakeClock()
        yield FakeHost(Path(tmp)), MetricCache(clock=clock, wall_clock=clock.wall), clock, RecordingErrors()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["stat", "meminfo"]), st.data())
def test_the_node_collector_counts_a_broken_proc_file_and_goes_on(which: str, data: st.DataObject) -> None:
    with fresh_host() as (fh, cache, clock, errors):
        fh.write_proc_stat(user=100, system=50, idle=1000, per_cpu=((0, 0, 0, 0),))
        fh.write_meminfo(total_kib=8 << 20, available_kib=6 << 20)
        col = NodeResourceCollector(
            NodeResourceConfig(1.0, clk_tck=100),
            fw.Options(cache=cache, clock=clock, errors=errors, paths=fh.paths, shared=fw.SharedState()),
        )
        col.collect()
        clock.advance(1.0)
        fh.write_proc_stat(user=150, system=60, idle=1080, per_cpu=((0, 0, 0, 0),))
        col.collect()
        assert cache.latest(api.NODE_CPU_USAGE) and cache.latest(api.NODE_MEMORY_USAGE)
        path = fh.paths.proc_root / which
        path.write_text(data.draw(text_mutations(path.read_text()) | st.text(max_size=100)))
        clock.advance(1.0)
        col.collect()  # never raises
        if sum(errors.counts.values()) == 0:
            return  # the mutation still parsed
        assert errors.kind(fw.ERR_MALFORMED) >= 1
        # The series of the broken file keeps its last good sample; the other one goes on.
        assert cache.latest(api.NODE_CPU_USAGE) and cache.latest(api.NODE_MEMORY_USAGE)
        col.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["memory.stat", "cpuacct.usage"]), st.data())
def test_a_broken_cgroup_file_skips_only_its_pods_series(which: str, data: st.DataObject) -> None:
    with fresh_host() as (fh, cache, clock, errors):
        pods = [make_pod(f"pod-{i}", uid=pod_uid(i), containers=0) for i in (1, 2)]
        dirs = [fh.pod_cgroup(p.uid) for p in pods]
        for d in dirs:
            fh.write_cgroup("cpuacct.usage", d, "0")
            fh.write_cgroup("memory.stat", d, MEMORY_STAT)
        host = fh.host()
        col = PodResourceCollector(
            PodResourceConfig(1.0),
            fw.Options(
                cache=cache,
                clock=clock,
                errors=errors,
                host=host,
                states=FakeStates(pods=pods),
                shared=fw.SharedState(),
            ),
        )
        col.collect()
        clock.advance(1.0)
        broken = fh.write_cgroup(which, dirs[1], "0")
        broken.write_text(data.draw(text_mutations(MEMORY_STAT if which == "memory.stat" else "1000000\n")))
        for d in dirs[:1]:
            fh.write_cgroup("cpuacct.usage", d, "500000000")
        col.collect()  # never raises
        cpu = {labels["pod_uid"] for labels, _t, _v in cache.latest(api.POD_CPU_USAGE)}
        mem = {labels["pod_uid"] for labels, _t, _v in cache.latest(api.POD_MEMORY_USAGE)}
        assert pods[0].uid in cpu and pods[0].uid in mem  # the healthy pod is unaffected
        col.close()


@pytest.mark.parametrize("field", ["-1", "+5", "1_0", "²"])
def test_proc_files_take_unsigned_decimals_only(field: str) -> None:
    """``int()`` takes all of these; the kernel prints none of them (a negative tick count read as a
    counter going backwards, not as a malformed file)."""
    with pytest.raises(KoordletError):
        procfs.parse_proc_stat(f"cpu {field} 0 0 60 0 0 0 0 0 0\n")
    with pytest.raises(KoordletError):
        procfs.parse_meminfo(f"MemTotal: {field} kB\nMemAvailable: 1 kB\n")
