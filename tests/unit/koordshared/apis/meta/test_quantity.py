"""Kubernetes quantity and Go duration parsing/formatting."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordshared.apis.meta import quantity as q
from koordshared.runtime.errors import InvalidValue


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("1", Fraction(1)),
        ("1.5", Fraction(3, 2)),
        ("1Gi", Fraction(2**30)),
        ("512Mi", Fraction(512 * 2**20)),
        ("1e3", Fraction(1000)),
        ("1E-3", Fraction(1, 1000)),
        ("2k", Fraction(2000)),
        ("1M", Fraction(10**6)),
        ("100n", Fraction(1, 10**7)),
        ("+.5", Fraction(1, 2)),
        ("-1Ki", Fraction(-1024)),
        (3, Fraction(3)),
        (0.25, Fraction(1, 4)),
    ],
)
def test_parse(text: str | int | float, value: Fraction) -> None:
    assert q.parse_quantity(text) == value


@pytest.mark.parametrize(
    "bad", ["", "abc", "1.2.3", "1Ki5", "1KB", "1e", "1e999", "Gi", "1 Gi", True, "9" * 80]
)
def test_parse_refuses(bad: object) -> None:
    with pytest.raises(InvalidValue):
        q.parse_quantity(bad)  # type: ignore[arg-type]


def test_rounding_up_as_kubernetes() -> None:
    assert q.to_milli("0.1m") == 1  # MilliValue rounds up: a tiny request is never 0
    assert q.to_milli("1.5") == 1500
    assert q.to_int("1.5") == 2
    assert q.to_int("1Gi") == 1073741824
    assert q.to_milli("2") == 2000


@pytest.mark.parametrize(
    ("milli", "text"), [(1500, "1500m"), (2000, "2"), (0, "0"), (1, "1m"), (12000, "12")]
)
def test_format_milli(milli: int, text: str) -> None:
    assert q.format_milli(milli) == text
    assert q.to_milli(text) == milli


@pytest.mark.parametrize(
    ("value", "text"),
    [(2**31, "2Gi"), (1536, "1536"), (1024, "1Ki"), (3 * 2**20, "3Mi"), (0, "0"), (1000, "1000")],
)
def test_format_bytes_round_trips(value: int, text: str) -> None:
    assert q.format_bytes(value) == text
    assert q.to_int(text) == value


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5m", 300), ("5m0s", 300), ("1h30m", 5400), ("300s", 300), ("1.5h", 5400), ("500ms", 0.5)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert q.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "5", "m5", "5x", "5m 3s", "1w", "-5m", "1e3s"])
def test_parse_duration_refuses(bad: str) -> None:
    with pytest.raises(InvalidValue):
        q.parse_duration(bad)


@pytest.mark.parametrize(
    ("seconds", "text"), [(300, "5m0s"), (600, "10m0s"), (1800, "30m0s"), (3600, "1h0m0s"), (45, "45s")]
)
def test_format_duration_matches_go(seconds: float, text: str) -> None:
    assert q.format_duration(seconds) == text
    assert q.parse_duration(text) == seconds


def test_format_decimal_like_kubernetes() -> None:
    assert [q.format_decimal(v) for v in (0, 1500, 3000, 2_500_000, 10**9, -2000)] == [
        "0",
        "1500",
        "3k",
        "2500k",
        "1G",
        "-2k",
    ]
    for v in (1, 999, 1000, 123456000):
        assert q.to_int(q.format_decimal(v)) == v


def test_parse_seconds_numbers_strings_and_go_durations() -> None:
    assert [q.parse_seconds(v) for v in (2, 1.5, "1.5", "500ms", "1m30s", " 15s ")] == [
        2.0,
        1.5,
        1.5,
        0.5,
        90.0,
        15.0,
    ]
    for bad in ("soon", "", True, "5 s", "1.5.5"):
        with pytest.raises(InvalidValue):
            q.parse_seconds(bad)


@pytest.mark.parametrize("value", [[], {}, None, ["1"], {"cpu": "1"}])
def test_a_non_scalar_is_refused_not_raised_through(value: object) -> None:
    # Found by fuzzing pod objects: requests.cpu: [] escaped as an AttributeError and failed the whole
    # pod list.
    with pytest.raises(InvalidValue):
        q.parse_quantity(value)  # type: ignore[arg-type]


@given(
    st.integers(min_value=0, max_value=10**18 - 1),
    st.sampled_from(["m", "", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti"]),
)
def test_integer_fast_path_agrees_with_the_exact_parse(number: int, suffix: str) -> None:
    text = f"{number}{suffix}"
    assert q.to_milli(text) == math.ceil(q.parse_quantity(text) * 1000)
    assert q.to_int(text) == math.ceil(q.parse_quantity(text))


def test_fast_path_leaves_the_rest_to_the_exact_parse() -> None:
    assert q.to_milli(" 100m") == 100  # spaces: the general path strips them
    assert q.to_int("1500m") == 2 and q.to_milli("1.5") == 1500 and q.to_milli("1e3") == 10**6
    assert q.to_milli(7) == 7000
    with pytest.raises(InvalidValue):
        q.to_milli(True)
