"""The arithmetic ``bench/beside_kubelet.py`` reads the agent and the kubelet with, checked without a
cluster: CPU and RSS of a process, % of a core over a window, CPU per scrape over a baseline, and
``go tool pprof``'s totals, and the verdict naming where the agent costs more."""

from __future__ import annotations

import os
import time

import pytest

from bench.beside_kubelet import pct_of_core, per_event_cpu, pprof_seconds, read_proc, report


def test_percent_of_a_core_over_the_window() -> None:
    # 1.5 s of CPU over 60 s: 2.5 % of one core.
    assert pct_of_core(10.0, 11.5, 60.0) == pytest.approx(2.5)
    with pytest.raises(ValueError):
        pct_of_core(0.0, 1.0, 0.0)


def test_cpu_per_scrape_is_what_the_scrapes_add_to_the_baseline() -> None:
    # 2 s of wall time at a 10 % baseline is 0.2 s; 1.2 s measured leaves 1.0 s for 20 scrapes.
    assert per_event_cpu(1.2, 2.0, 10.0, 20) == pytest.approx(0.05)
    # Scrapes that cost less than the baseline's noise are not negative.
    assert per_event_cpu(0.1, 2.0, 10.0, 20) == 0.0


TOP = """File: kubelet
Type: cpu
Duration: 30s, Total samples = 1.20s ( 4.00%)
Active filters:
   focus=cadvisor/manager
Showing nodes accounting for 280ms, 23.33% of 1.20s total
      flat  flat%   sum%        cum   cum%
     260ms 21.67% 21.67%      260ms 21.67%  syscall.Syscall
"""


def test_pprof_totals_of_the_focused_samples_and_of_all() -> None:
    assert pprof_seconds(TOP) == pytest.approx((0.28, 1.2))
    nothing = (
        "Duration: 30s, Total samples = 980ms (3.27%)\nShowing nodes accounting for 0, 0% of 980ms total\n"
    )
    assert pprof_seconds(nothing) == pytest.approx((0.0, 0.98))
    assert pprof_seconds("Duration: 1.5mins, Total samples = 1.5mins (100%)\n") == pytest.approx((0.0, 90.0))
    with pytest.raises(ValueError):
        pprof_seconds("Fetching profile over HTTP: connection refused")


def test_read_proc_counts_this_process_cpu() -> None:
    before = read_proc(os.getpid())
    end = time.process_time() + 0.1
    while time.process_time() < end:
        pass
    after = read_proc(os.getpid())
    # /proc counts whole clock ticks: each end may lag a tick (and the difference of two floats a hair).
    assert after.cpu - before.cpu >= 0.075 and after.rss_mib > 1


def _figures(agent_cpu: float, agent_rss: float) -> dict[str, object]:
    kubelet_cpu, kubelet_rss = 2.0, 80.0
    return {
        "pods": 100,
        "seconds": 60.0,
        "cpus": 2,
        "load1": 1.0,
        "agent_cpu_pct": agent_cpu,
        "agent_rss_mib": agent_rss,
        "kubelet_cpu_pct": kubelet_cpu,
        "kubelet_rss_mib": kubelet_rss,
        "containerd_cpu_pct": 0.5,
        "containerd_rss_mib": 40.0,
        "cpu_ratio": agent_cpu / kubelet_cpu,
        "rss_ratio": agent_rss / kubelet_rss,
        "agent_sweep_cpu_pct": 0.3,
        "agent_us_per_pod_sample": 30.0,
        "kubelet_whole_us_per_pod_housekeeping": 2000.0,
        "agent_scrape_ms": None,
        "agent_scrape_bytes": None,
        "cadvisor_scrape_cpu_ms": 40.0,
        "cadvisor_us_per_pod_scrape": 400.0,
        "cadvisor_scrape_ms": 50.0,
        "cadvisor_scrape_bytes": 500000,
        "cadvisor_series": 3000,
    }


def test_the_verdict_names_where_the_agent_costs_more() -> None:
    assert report(_figures(1.0, 50.0))[-1].startswith("the agent costs no more than the kubelet")
    over = report(_figures(3.0, 50.0))[-1]
    assert "MORE" in over and "CPU 1.50x" in over and "RSS" not in over
    both = report(_figures(3.0, 100.0))[-1]
    assert "CPU 1.50x" in both and "RSS 1.25x" in both


def test_with_the_kubelets_profile_the_sample_row_is_cadvisors_own() -> None:
    f = _figures(1.0, 50.0) | {
        "seconds_profiled": 30.0,
        "kubelet_profiled_pct": 3.0,
        "housekeeping_pct": 0.9,
        "cadvisor_pct": 1.5,
        "cadvisor_us_per_pod_sample": 900.0,
    }
    lines = report(f)
    row = next(line for line in lines if line.startswith("per pod per sample"))
    assert row.split()[-2:] == ["30.0", "900.0"]
    assert any(line.startswith("cAdvisor's housekeeping") and "0.900 %" in line for line in lines)
    without = next(line for line in report(_figures(1.0, 50.0)) if line.startswith("per pod per sample"))
    assert without.split()[-1] == "2000.0"
