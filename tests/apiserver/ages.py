"""How old a timestamp is, as kube-apiserver's printers say it: ``duration.HumanDuration``
(``apimachinery/pkg/util/duration``) of the time since it (``45s``, ``5m12s``, ``3h``, ``12d``;
``<invalid>`` for a time more than a second ahead), ``<unknown>`` for an unset one.
"""

from __future__ import annotations

import datetime
from typing import Any


def parse_time(value: Any) -> float | None:
    # Not koordshared.apis.meta.quantity's: the stand-in server imports nothing of the clients it checks, so a
    # parsing bug on their side cannot hide behind the same bug on the server's.
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def since(value: Any, now: float) -> str:
    """``translateTimestampSince``: the age of a timestamp, ``<unknown>`` when it is unset."""
    at = parse_time(value)
    return "<unknown>" if at is None else human_duration(now - at)
