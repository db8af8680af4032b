"""Hypothesis strategies for the fuzz suite: any JSON value, and mutations of valid inputs (a leaf of an
object replaced or removed, a text truncated, a line dropped or doubled, a token swapped for noise)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

_DELETE = object()

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=24)
    | st.sampled_from(
        ["", "0", "-1", "1e400", "100", "150", "NaN", "10Gi", "1e-9", "x" * 300, "../..", "\x00"]
    )
)
json_values = st.recursive(
    json_leaves,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=16), kids, max_size=4),
    max_leaves=16,
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _replace(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    out = copy.deepcopy(obj)
    node = out
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


@st.composite
def mutations(draw: st.DrawFn, base: Any, rounds: int = 3) -> Any:
    """``base`` with up to ``rounds`` leaves or subtrees replaced by any JSON value, or removed."""
    obj = base
    for _ in range(draw(st.integers(1, rounds))):
        path = draw(st.sampled_from(list(_paths(obj))))
        value = draw(json_values | st.just(_DELETE)) if path else draw(json_values)
        obj = _replace(obj, path, value)
    return obj


@st.composite
def text_mutations(draw: st.DrawFn, base: str) -> str:
    """``base`` broken the ways files break: truncated, a line lost or doubled, a token replaced."""
    lines = base.splitlines(keepends=True)
    kind = draw(st.sampled_from(["truncate", "drop", "double", "token", "noise", "empty"]))
    if kind == "truncate":
        return base[: draw(st.integers(0, len(base)))]
    if kind == "empty":
        return draw(st.sampled_from(["", "\n", " ", "\x00"]))
    if not lines:
        return draw(st.text(max_size=64))
    i = draw(st.integers(0, len(lines) - 1))
    if kind == "drop":
        return "".join(lines[:i] + lines[i + 1 :])
    if kind == "double":
        return "".join(lines[: i + 1] + lines[i:])
    if kind == "noise":
        return "".join(lines[:i]) + draw(st.text(max_size=40)) + "".join(lines[i:])
    tokens = lines[i].split(" ")
    j = draw(st.integers(0, len(tokens) - 1))
    tokens[j] = draw(
        st.sampled_from(["", "-1", "x", "1e3", "99999999999999999999999", "0x10", "\uff11\uff12", "nan"])
        | st.text(max_size=8)
    )
    return "".join(lines[:i]) + " ".join(tokens) + "".join(lines[i + 1 :])
