"""cpu-list parse/format: examples, refusals and round-trip properties."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordlet.api.cpulist import format_cpuset, parse_cpuset
from koordshared.runtime.errors import InvalidValue


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0-3,8", {0, 1, 2, 3, 8}), ("5", {5}), ("", set()), ("  \n", set()), ("1,0,2-2", {0, 1, 2})],
)
def test_parse_examples(text: str, cpus: set[int]) -> None:
    assert parse_cpuset(text) == frozenset(cpus)


@pytest.mark.parametrize("bad", ["zz", "3-1", "1-", "-1", "0,,1", "1:2", "0-3:2/4", "1 2", "99999999", "0x1"])
def test_parse_refuses_bad_syntax(bad: str) -> None:
    with pytest.raises(InvalidValue):
        parse_cpuset(bad)


def test_format_collapses_ranges() -> None:
    assert format_cpuset([8, 3, 2, 1, 0, 10, 11]) == "0-3,8,10-11"
    assert format_cpuset([]) == ""


cpu_sets = st.frozensets(st.integers(min_value=0, max_value=300), max_size=60)


@given(cpu_sets)
def test_parse_format_roundtrip(cpus: frozenset[int]) -> None:
    assert parse_cpuset(format_cpuset(cpus)) == cpus


@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 20)), max_size=12))
def test_format_of_any_spelling_is_canonical(ranges: list[tuple[int, int]]) -> None:
    # Any valid (unsorted, overlapping, single-or-range) spelling normalizes to one canonical string.
    text = ",".join(f"{lo}-{lo + n}" if n else str(lo) for lo, n in ranges)
    canon = format_cpuset(parse_cpuset(text))
    assert format_cpuset(parse_cpuset(canon)) == canon
    items = [i for i in canon.split(",") if i]
    bounds = [tuple(int(x) for x in i.split("-")) for i in items]
    for (a, *ra), (b, *_) in itertools.pairwise(bounds):
        end = ra[0] if ra else a
        assert b > end + 1, "adjacent ranges must be merged and sorted"
