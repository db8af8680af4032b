"""Go's strict JSON decoding of plugin args (``pluginConfig[].args``), shared by the scheduler's and the
descheduler's plugins: unknown fields and wrong JSON types are errors naming the field; ``null`` means
absent. Each field of a spec names its kind:

``bool``, ``int`` (not a bool, not a float), ``number`` (int or float), ``str``, ``object``,
``str_list``, ``object_list``, ``int_map``/``number_map`` (resource name -> value), ``duration`` (a Go
duration string such as ``"5m"``, as ``metav1.Duration`` encodes it), and ``any`` (passed through for the
caller to check: Go's ``IntOrString`` and ``Float64OrString``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordshared.apis.meta.quantity import parse_duration
from koordshared.runtime.errors import InvalidArgs, InvalidValue

__all__ = ["InvalidArgs", "decode"]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _map(value: Any, at: str, check: Any, want: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidArgs(f"{at}: want an object of resource name -> {want}, got {value!r}")
    for name, v in value.items():
        if not check(v):
            raise InvalidArgs(f"{at}.{name}: want {want}, got {v!r}")
    return {str(k): v for k, v in value.items()}


def _one(kind: str, value: Any, at: str) -> Any:
    if kind == "any":
        pass
    elif kind == "bool":
        if not isinstance(value, bool):
            raise InvalidArgs(f"{at}: want true or false, got {value!r}")
    elif kind == "int":
        if not _is_int(value):
            raise InvalidArgs(f"{at}: want an integer, got {value!r}")
    elif kind == "number":
        if not _is_number(value):
            raise InvalidArgs(f"{at}: want a number, got {value!r}")
    elif kind == "str":
        if not isinstance(value, str):
            raise InvalidArgs(f"{at}: want a string, got {value!r}")
    elif kind == "object":
        if not isinstance(value, Mapping):
            raise InvalidArgs(f"{at}: want an object, got {value!r}")
    elif kind == "str_list":
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise InvalidArgs(f"{at}: want a list of strings, got {value!r}")
        value = tuple(value)
    elif kind == "object_list":
        if not isinstance(value, list) or not all(isinstance(x, Mapping) for x in value):
            raise InvalidArgs(f"{at}: want a list of objects, got {value!r}")
        value = list(value)
    elif kind == "int_map":
        value = _map(value, at, _is_int, "an integer")
    elif kind == "number_map":
        value = _map(value, at, _is_number, "a number")
    elif kind == "duration":
        if not isinstance(value, str):
            raise InvalidArgs(f'{at}: want a duration such as "5m", got {value!r}')
        try:
            value = parse_duration(value)
        except InvalidValue as err:
            raise InvalidArgs(f"{at}: {err}") from err
    else:
        raise ValueError(f"unknown kind {kind!r}")
    return value


def decode(raw: Mapping[str, Any] | None, spec: Mapping[str, str], where: str = "") -> dict[str, Any]:
    """The fields of ``raw`` present (and not ``null``), checked against ``spec`` (field -> kind);
    ``where`` prefixes field names in errors (``"nodePools[0]."``)."""
    raw = raw or {}
    if not isinstance(raw, Mapping):
        raise InvalidArgs(f"{where or 'args'}: want an object, got {raw!r}")
    unknown = sorted(set(raw) - set(spec))
    if unknown:
        raise InvalidArgs(f"{where}unknown field(s) {', '.join(unknown)}")
    return {
        key: _one(kind, raw[key], f"{where}{key}") for key, kind in spec.items() if raw.get(key) is not None
    }
