"""RFC 3339 timestamps as Kubernetes writes them (schema layer).

``metav1.Time`` is whole seconds (``2026-01-01T00:00:00Z``); ``metav1.MicroTime`` (Lease ``renewTime``,
``acquireTime``; events.k8s.io ``eventTime``) has exactly six fractional digits. Parsing accepts either,
with ``Z`` or a numeric offset, and answers ``None`` for anything else rather than raising: a timestamp
written by another component is data, not a reason to stop.
"""

from __future__ import annotations

from datetime import UTC, datetime


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
