"""``process_*`` of the agent: what prometheus_client's ProcessCollector says, with the open-descriptor
count (a listing of /proc/self/fd, 6500 entries at 1000 pods) recounted at most every 30 s."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, ProcessCollector

from koordlet.metrics import FD_RECOUNT_SECONDS, ProcessMetrics
from koordlet.testing import FakeClock

NAMES = ("virtual_memory_bytes", "start_time_seconds", "max_fds", "open_fds")


def values(reg: CollectorRegistry) -> dict[str, float]:
    return {n: reg.get_sample_value(f"process_{n}") or 0.0 for n in NAMES}


def test_same_figures_as_prometheus_client_and_a_cached_fd_count() -> None:
    clock = FakeClock()
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    ProcessMetrics(ours, clock=clock)
    ProcessCollector(registry=theirs)
    assert values(ours) == values(theirs)
    assert ours.get_sample_value("process_cpu_seconds_total") is not None
    before = values(ours)["open_fds"]
    fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(20)]
    try:
        assert values(ours)["open_fds"] == before  # not recounted yet
        clock.advance(FD_RECOUNT_SECONDS)
        assert values(ours)["open_fds"] == before + 20 == values(theirs)["open_fds"]
    finally:
        for fd in fds:
            os.close(fd)
