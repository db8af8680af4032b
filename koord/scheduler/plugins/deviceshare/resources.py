"""Resource lists per device, and the arithmetic Koordinator does on them (``quotav1``,
``device_resources.go``).

A resource list is ``{name: value}`` in the scheduler's units; :data:`Devices` maps a device minor to the
resource list of that device; :data:`ByType` maps a device type (``gpu``, ``rdma``, ``fpga``) to its
devices. Functions return new values and never change their arguments unless they say so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

ResourceList = dict[str, int]
Devices = dict[int, ResourceList]
ByType = dict[str, Devices]


def add(a: Mapping[str, int], b: Mapping[str, int]) -> ResourceList:
    """``quotav1.Add``: every name of either, summed."""
    out = dict(a)
    for n, v in b.items():
        out[n] = out.get(n, 0) + v
    return out


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> ResourceList:
    """``quotav1.Subtract``: every name of either, ``a - b`` (may be negative)."""
    out = dict(a)
    for n, v in b.items():
        out[n] = out.get(n, 0) - v
    return out


def subtract_non_negative(a: Mapping[str, int], b: Mapping[str, int]) -> ResourceList:
    """``quotav1.SubtractWithNonNegativeResult``: every name of either, ``max(a - b, 0)``."""
    out = {n: max(v - b.get(n, 0), 0) for n, v in a.items()}
    for n in b:
        out.setdefault(n, 0)
    return out


def fits(request: Mapping[str, int], free: Mapping[str, int] | None) -> bool:
    """``quotav1.LessThanOrEqual``: every name of both within ``free``. As in Kubernetes, a name ``free``
    lacks is not checked (a device that does not report GPU memory takes any GPU-memory request)."""
    return all(request[n] <= v for n, v in (free or {}).items() if n in request)


def is_zero(a: Mapping[str, int] | None) -> bool:
    """``quotav1.IsZero``: empty or all zero."""
    return not a or not any(a.values())


def equals(a: Mapping[str, int], b: Mapping[str, int]) -> bool:
    """``quotav1.Equals``: the same names with the same values."""
    return len(a) == len(b) and all(n in b and b[n] == v for n, v in a.items())


def minimum(a: Mapping[str, int], b: Mapping[str, int]) -> ResourceList:
    """Koordinator's ``MinResourceList``: the names of both, the smaller value."""
    return {n: min(v, b[n]) for n, v in a.items() if n in b}


def mask(a: Mapping[str, int], names: Iterable[str]) -> ResourceList:
    """``quotav1.Mask``: only ``names``."""
    keep = set(names)
    return {n: v for n, v in a.items() if n in keep}


def copy_devices(d: Mapping[int, Mapping[str, int]] | None) -> Devices:
    return {m: dict(r) for m, r in (d or {}).items()}


def copy_by_type(m: Mapping[str, Mapping[int, Mapping[str, int]]] | None) -> ByType:
    return {t: copy_devices(d) for t, d in (m or {}).items()}


def append_devices(
    into: Devices, more: Mapping[int, Mapping[str, int]], minors: set[int] | None = None
) -> None:
    """Add ``more`` device by device into ``into`` (only ``minors`` when given and not empty)."""
    for minor, res in more.items():
        if minors and minor not in minors:
            continue
        into[minor] = add(into[minor], res) if minor in into else dict(res)


def subtract_devices(into: Devices, less: Mapping[int, Mapping[str, int]], non_negative: bool) -> None:
    """Take ``less`` off ``into`` device by device; a device left with nothing is dropped."""
    for minor, res in less.items():
        left = (subtract_non_negative if non_negative else subtract)(into.get(minor, {}), res)
        if is_zero(left):
            into.pop(minor, None)
        else:
            into[minor] = left


def append_allocated(
    base: ByType | None, *more: Mapping[str, Mapping[int, Mapping[str, int]]] | None
) -> ByType:
    """Koordinator's ``appendAllocated``: ``base`` (changed in place, or a new one) plus each of ``more``."""
    out: ByType = {} if base is None else base
    for allocated in more:
        for t, devices in (allocated or {}).items():
            if t in out:
                append_devices(out[t], devices)
            else:
                out[t] = copy_devices(devices)
    return out


def append_allocated_by_hints(
    hints: Mapping[str, set[int]],
    base: ByType | None,
    *more: Mapping[str, Mapping[int, Mapping[str, int]]] | None,
) -> ByType:
    """``appendAllocatedByHints``: like :func:`append_allocated` but only for the hinted types and minors."""
    out: ByType = {} if base is None else base
    for t, minors in hints.items():
        for allocated in more:
            if allocated and t in allocated:
                append_devices(out.setdefault(t, {}), allocated[t], minors)
    return out


def subtract_allocated(
    base: ByType, allocated: Mapping[str, Mapping[int, Mapping[str, int]]] | None, non_negative: bool
) -> ByType:
    """``subtractAllocated``: ``base`` (changed in place) less ``allocated``; empty types dropped."""
    for t, devices in (allocated or {}).items():
        left = base.setdefault(t, {})
        subtract_devices(left, devices, non_negative)
        if not left:
            del base[t]
    return base


def minor_sets(m: Mapping[str, Mapping[int, object]]) -> dict[str, set[int]]:
    """``newDeviceMinorMap``: the minors of each type."""
    return {t: set(d) for t, d in m.items()}


def devices_zero(d: Mapping[int, Mapping[str, int]]) -> bool:
    return all(is_zero(r) for r in d.values())
