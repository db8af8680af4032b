"""The pod sweep over a FakeHost tree: a cgroup's CPU, memory and throttling counters written as the
kernel of its cgroup version shows them, and a ``PodResourceCollector`` on the tree, for the collector's
tests and ``bench/podsweep.py``."""

from __future__ import annotations

from typing import Any

from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.podresource import PodResourceCollector, PodResourceConfig
from koordlet.system.cgroups import CgroupMode
from koordlet.testing import FakeClock, FakeStates
from tests.support.recording import RecordingErrors


def set_usage(
    fh: Any,
    cgroup_dir: str,
    *,
    cpu_ns: int,
    anon: int = 0,
    inactive: int = 0,
    unevictable: int = 0,
    periods: int = 0,
    throttled: int = 0,
    file: int = 0,
) -> None:
    if fh.mode is CgroupMode.V2:
        fh.write_cgroup(
            "cpu.stat",
            cgroup_dir,
            f"usage_usec {cpu_ns // 1000}\nuser_usec 0\nsystem_usec 0\nnr_periods {periods}\n"
            f"nr_throttled {throttled}\nthrottled_usec 0\n",
        )
    else:
        fh.write_cgroup("cpuacct.usage", cgroup_dir, str(cpu_ns))
        fh.write_cgroup(
            "cpu.stat", cgroup_dir, f"nr_periods {periods}\nnr_throttled {throttled}\nthrottled_time 0\n"
        )
    fh.write_memory_stat(
        cgroup_dir,
        active_anon=anon,
        inactive_anon=inactive,
        unevictable=unevictable,
        active_file=file,
        inactive_file=file,
    )


def make(
    fh: Any,
    cache: MetricCache,
    states: FakeStates,
    clock: FakeClock,
    errors: RecordingErrors,
    shared: fw.SharedState | None = None,
    *,
    force_python: bool = False,
) -> PodResourceCollector:
    return PodResourceCollector(
        PodResourceConfig(1.0, force_python=force_python),
        fw.Options(
            cache=cache,
            clock=clock,
            errors=errors,
            host=fh.host(),
            states=states,
            shared=shared or fw.SharedState(),
        ),
    )
