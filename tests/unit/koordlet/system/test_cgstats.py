"""memory.stat / cpu.stat / cpuacct.usage parsers, v1 and v2, and malformed input (F3)."""

from __future__ import annotations

import pytest

from koordlet.system.cgstats import (
    parse_cpu_stat,
    parse_cpuacct_usage,
    parse_memory_stat,
)
from koordshared.runtime.errors import InvalidValue

V1_MEMORY_STAT = """cache 4096
rss 8192
active_anon 1
inactive_anon 2
total_cache 409600
total_rss 819200
total_active_anon 300000
total_inactive_anon 500000
total_active_file 7000
total_inactive_file 9000
total_unevictable 20000
"""
V2_MEMORY_STAT = """anon 819200
file 409600
kernel 12
active_anon 300000
inactive_anon 500000
active_file 7000
inactive_file 9000
unevictable 20000
"""


def test_memory_stat_v1_uses_hierarchical_totals() -> None:
    m = parse_memory_stat(V1_MEMORY_STAT)
    assert m.usage == 300000 + 500000 + 20000
    assert (m.cache, m.rss) == (409600, 819200)


def test_memory_stat_v2_gives_the_same_usage() -> None:
    assert parse_memory_stat(V2_MEMORY_STAT) == parse_memory_stat(V1_MEMORY_STAT)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "total_inactive_anon 1\n",
        "anon 1\nfile x\n",
        "anon 1 2\n",
        V2_MEMORY_STAT.replace("unevictable", "u"),
    ],
)
def test_memory_stat_malformed(text: str) -> None:
    with pytest.raises(InvalidValue):
        parse_memory_stat(text)


def test_cpu_stat_v1_and_v2() -> None:
    v1 = parse_cpu_stat("nr_periods 10\nnr_throttled 4\nthrottled_time 123456\nnr_bursts 0\nburst_time 0\n")
    assert (v1.nr_periods, v1.nr_throttled, v1.throttled_ns, v1.usage_ns) == (10, 4, 123456, None)
    v2 = parse_cpu_stat(
        "usage_usec 5000\nuser_usec 3000\nsystem_usec 2000\nnr_periods 10\nnr_throttled 4\nthrottled_usec 7\n"
    )
    assert (v2.nr_periods, v2.nr_throttled, v2.throttled_ns, v2.usage_ns) == (10, 4, 7000, 5000000)
    no_cpu_controller = parse_cpu_stat("usage_usec 9\nuser_usec 5\nsystem_usec 4\n")
    assert (no_cpu_controller.usage_ns, no_cpu_controller.nr_periods) == (9000, 0)


@pytest.mark.parametrize("text", ["", "nr_periods 1\n", "nr_periods 1\nnr_throttled x\nthrottled_time 1\n"])
def test_cpu_stat_malformed(text: str) -> None:
    with pytest.raises(InvalidValue):
        parse_cpu_stat(text)


def test_cpuacct_usage() -> None:
    assert parse_cpuacct_usage("123456789\n") == 123456789
    for bad in ("", "-1", "12a", "1 2"):
        with pytest.raises(InvalidValue):
            parse_cpuacct_usage(bad)


def test_cpu_usage_ns_in_both_versions() -> None:
    from koordlet.system.cgstats import parse_cpu_usage_ns

    assert parse_cpu_usage_ns("123456789\n", v2=False) == 123456789
    assert parse_cpu_usage_ns("usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n", v2=True) == 1_500_000
    with pytest.raises(InvalidValue):
        parse_cpu_usage_ns("user_usec 1000\n", v2=True)
    with pytest.raises(InvalidValue):
        parse_cpu_usage_ns("-5", v2=False)
