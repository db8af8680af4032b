"""Resource lists between the scheduler's integers and the API's quantities, as Koordinator prints them:
``cpu`` from millicores (``NewMilliQuantity``), memory and storage in binary units (``BinarySI``), any
other resource as a decimal count; and the one-line form of its messages (``printResourceList``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from koordshared.apis.meta.quantity import format_bytes, format_decimal, format_milli

_BINARY = ("memory", "ephemeral-storage", "storage")


def quantity(name: str, value: int) -> str:
    """``value`` of resource ``name`` as the API prints it (``1500m``, ``2``, ``4Gi``, ``3k``)."""
    if name == "cpu":
        return format_decimal(value // 1000) if value % 1000 == 0 else format_milli(value)
    if name in _BINARY or name.startswith("hugepages-"):
        return format_bytes(value)
    return format_decimal(value)


def to_list(values: Mapping[str, int]) -> dict[str, str]:
    """A ResourceList object (names sorted, as Go's JSON encoder sorts map keys)."""
    return {name: quantity(name, values[name]) for name in sorted(values)}


def printed(values: Mapping[str, int]) -> str:
    """Koordinator's ``printResourceList``: ``cpu:2,memory:4Gi`` sorted, ``<empty>`` for none."""
    if not values:
        return "<empty>"
    return ",".join(sorted(f"{name}:{quantity(name, v)}" for name, v in values.items()))


def go_list(items: Iterable[str]) -> str:
    """A Go string slice as ``%v`` prints it: ``[cpu memory]``."""
    return "[" + " ".join(items) + "]"
