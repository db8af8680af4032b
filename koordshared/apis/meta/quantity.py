"""Kubernetes resource quantities, Go durations and RFC 3339 timestamps, as Kubernetes writes them.

Go durations are parsed by ``durationpy``; Go's ``Duration.String()`` form (``5m0s``) is written here.
Quantities follow ``k8s.io/apimachinery/pkg/api/resource``: a signed decimal with an optional binary
suffix (``Ki``..``Ei``), decimal suffix (``n``, ``u``, ``m``, ``k``..``E``) or exponent (``1e3``). Values
are kept exact (``Fraction``) and rounded up when reduced to an integer, as ``Quantity.Value()`` and
``MilliValue()`` do, so ``"0.1m"`` of CPU is 1 millicore, never 0. This is the agent's one quantity
parser (``kubernetes.utils.quantity`` loads the whole client and accepts ``"1 Gi"``). Timestamps:
``metav1.Time`` is whole seconds, ``metav1.MicroTime`` six fractional digits; parsing answers ``None``
rather than raising, since a timestamp written by another component is data, not a reason to stop.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from fractions import Fraction

import durationpy

from koordshared.runtime.errors import InvalidValue

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?\Z"
)
_MAX_TEXT = 64
_MAX_EXPONENT = 30
"""Refuse ``1e999999``: Kubernetes caps quantities far below this and a huge power would stall us."""


def parse_quantity(text: str | int | float) -> Fraction:
    """The exact value of a quantity (``"500m"`` -> 1/2, ``"1Gi"`` -> 1073741824); :class:`InvalidValue`
    for anything Kubernetes would refuse. JSON numbers (int/float) are accepted as the API does."""
    if isinstance(text, bool):
        raise InvalidValue("quantity", text, "a boolean is not a quantity")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise InvalidValue("quantity", text, "not finite")
        return Fraction(str(text))
    if not isinstance(text, str):  # a list or an object where a quantity belongs (found by fuzzing)
        raise InvalidValue("quantity", text, f"a {type(text).__name__} is not a quantity")
    s = text.strip()
    m = _QUANTITY.match(s) if len(s) <= _MAX_TEXT else None
    if m is None:
        raise InvalidValue("quantity", text, "not a Kubernetes quantity")
    number, suffix = Fraction(m.group(1)), m.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exponent = int(suffix[1:])
    if abs(exponent) > _MAX_EXPONENT:
        raise InvalidValue("quantity", text, "exponent out of range")
    return number * Fraction(10) ** exponent


_INTEGER = re.compile(r"^([0-9]{1,18})(m|Ki|Mi|Gi|Ti|k|M|G|T|)\Z")
_MILLI_PER_UNIT = {"m": 1, "": 1000, **{k: v * 1000 for k, v in _BINARY.items()}}
_MILLI_PER_UNIT.update({k: int(v * 1000) for k, v in _DECIMAL.items() if v >= 1})


def _fast_milli(text: str | int | float) -> int | None:
    """The exact millis of an integer quantity with a common suffix (what the API and the agent write:
    ``"1500m"``, ``"2"``, ``"512Mi"``), without building a ``Fraction``: NodeMetrics carry thousands of
    them. ``None`` for anything else, which takes the general path."""
    if type(text) is int:
        return text * 1000
    if type(text) is not str:
        return None
    m = _INTEGER.match(text)
    return int(m.group(1)) * _MILLI_PER_UNIT[m.group(2)] if m else None


def to_milli(text: str | int | float) -> int:
    """Millis of a quantity, rounded up (``MilliValue``): CPU ``"1.5"`` -> 1500, ``"100m"`` -> 100."""
    fast = _fast_milli(text)
    return fast if fast is not None else math.ceil(parse_quantity(text) * 1000)


def to_int(text: str | int | float) -> int:
    """The integer value, rounded up (``Value``): memory ``"1Gi"`` -> 1073741824."""
    fast = _fast_milli(text)
    return -(-fast // 1000) if fast is not None else math.ceil(parse_quantity(text))


def format_milli(milli: int) -> str:
    """CPU as Kubernetes prints ``NewMilliQuantity(v, DecimalSI)``: 1500 -> ``"1500m"``, 2000 -> ``"2"``."""
    if milli % 1000 == 0:
        return str(milli // 1000)
    return f"{milli}m"


def format_decimal(value: int) -> str:
    """An integer as Kubernetes prints ``NewQuantity(v, DecimalSI)``: trailing thousands become a suffix
    (``3000`` -> ``"3k"``, ``2500000`` -> ``"2500k"``, ``1500`` -> ``"1500"``)."""
    if value == 0:
        return "0"
    for suffix, unit in (
        ("E", 10**18),
        ("P", 10**15),
        ("T", 10**12),
        ("G", 10**9),
        ("M", 10**6),
        ("k", 10**3),
    ):
        if value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)


def format_bytes(value: int) -> str:
    """Memory as Kubernetes prints ``NewQuantity(v, BinarySI)``: the largest exact binary suffix
    (``2147483648`` -> ``"2Gi"``), else the plain integer (``1536`` -> ``"1536"``)."""
    if value == 0:
        return "0"
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _BINARY[suffix]
        if value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)


_GO_DURATION = re.compile(r"^(?:[0-9]+(?:\.[0-9]+)?(?:ns|us|µs|ms|s|m|h))+\Z")
"""Go's unsigned duration grammar. ``durationpy`` alone is laxer than Go: it skips text between units
(``"5m 3s"``) and knows units Go does not (``d``, ``w``, ``y``), so the shape is checked here first."""


def parse_duration(text: str) -> float:
    """Seconds of a Go ``time.Duration`` string (``"5m"``, ``"1h30m"``, ``"300s"``, ``"500ms"``); the one
    Go-duration parser of the agent (flags and NodeMetric specs). Signs are refused: every duration the
    agent reads is an interval or a window."""
    s = text.strip()
    if len(s) > _MAX_TEXT or not _GO_DURATION.match(s):
        raise InvalidValue("duration", text, "not a Go duration (e.g. 500ms, 1s, 5m, 1h30m)")
    try:
        return float(durationpy.from_str(s).total_seconds())
    except (ValueError, OverflowError) as err:  # durationpy.DurationError is a ValueError
        raise InvalidValue("duration", text, "out of range") from err


def parse_seconds(value: object) -> float:
    """Seconds from a number, a numeric string (``"1.5"``) or a Go duration (``"500ms"``, ``"1m30s"``)."""
    if isinstance(value, bool):
        raise InvalidValue("duration", value, "a boolean is not a duration")
    if isinstance(value, int | float):
        return float(value)
    raw = str(value).strip()
    try:
        return float(raw)
    except ValueError:
        pass
    return parse_duration(raw)


def format_duration(seconds: float) -> str:
    """Go's ``Duration.String()`` for whole seconds: 300 -> ``"5m0s"``, 3600 -> ``"1h0m0s"``."""
    total = round(seconds)
    if total == 0:
        return "0s"
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def format_time(wall: float) -> str:
    """``metav1.Time``: seconds since the epoch as ``YYYY-MM-DDTHH:MM:SSZ`` (truncated to the second)."""
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(wall: float) -> str:
    """``metav1.MicroTime``: ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (six fractional digits, always)."""
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: object) -> float | None:
    """Seconds since the epoch of an RFC 3339 timestamp, or ``None`` when ``text`` is not one."""
    if not isinstance(text, str) or not 20 <= len(text) <= 40 or text[10:11] not in ("T", "t"):
        return None
    raw = text[:-1] + "+00:00" if text[-1] in ("Z", "z") else text
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None  # RFC 3339 requires an offset; a naive time would be read in local time
    return parsed.timestamp()
