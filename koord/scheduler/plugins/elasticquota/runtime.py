"""The runtime quota: how much of its parent's resources each quota may use now (Koordinator's
``core/runtime_quota_calculator.go`` and ``core/scale_minquota_when_over_root_res.go``). Pure arithmetic
on integers in the scheduler's units (cpu in millicores, the rest as ``Value()``), no locks, no objects.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

Resources = dict[str, int]
ResourceView = Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Claim:
    """One child of a parent, in one resource."""

    name: str
    request: int
    """What it asks for, already capped at its max."""
    min: int
    weight: int
    lends: bool = True


def largest_remainder(total: int, claims: Sequence[Claim]) -> list[int]:
    """``total`` split in proportion to the claims' weights, exactly: each gets the floor of its share, and
    the units left go one each to the largest remainders (ties: smaller name first). Claims with a weight
    of zero or less get nothing."""
    weight = sum(c.weight for c in claims if c.weight > 0)
    out = [0] * len(claims)
    if total <= 0 or weight <= 0:
        return out
    remainders: list[tuple[int, str, int]] = []
    for i, c in enumerate(claims):
        if c.weight <= 0:
            continue
        out[i], rem = divmod(c.weight * total, weight)
        remainders.append((-rem, c.name, i))
    left = total - sum(out)
    for _, _, i in sorted(remainders)[:left]:
        out[i] += 1
    return out


def share_out(total: int, claims: Iterable[Claim]) -> Resources:
    """Each claim's runtime in one resource (Koordinator's ``redistribution``)."""
    runtime: Resources = {}
    borrowers: list[Claim] = []
    left = total
    for c in claims:
        if c.request > c.min:
            runtime[c.name] = c.min
            borrowers.append(c)
        else:
            runtime[c.name] = c.request if c.lends else c.min
        left -= runtime[c.name]
    while left > 0 and borrowers:
        deltas = largest_remainder(left, borrowers)
        if not any(deltas):
            break
        still: list[Claim] = []
        left = 0
        for c, delta in zip(borrowers, deltas, strict=True):
            got = runtime[c.name] + delta
            if got < c.request:
                runtime[c.name] = got
                still.append(c)
            else:  # a borrower never holds more than it asks for: the surplus is shared again
                left += got - c.request
                runtime[c.name] = c.request
        borrowers = still
    return runtime


def scaled_mins(total: ResourceView, mins: Mapping[str, ResourceView]) -> dict[str, Resources]:
    """The children's mins, scaled down in every resource of ``total`` whose sum of mins exceeds it."""
    sums: Resources = {}
    for m in mins.values():
        for r, v in m.items():
            sums[r] = sums.get(r, 0) + v
    over = [r for r, t in total.items() if t < sums.get(r, 0)]
    out = {name: dict(m) for name, m in mins.items()}
    if not over:
        return out
    for name, m in mins.items():
        for r in over:
            t = total[r]
            # Koordinator computes in float64 and truncates; the same here, so figures match its.
            out[name][r] = 0 if t <= 0 else int(float(t) * float(m.get(r, 0)) / float(sums[r]))
    return out


@dataclass(frozen=True, slots=True)
class QuotaInput:
    """One quota of the tree as the calculation sees it."""

    name: str
    parent: str
    min: ResourceView = field(default_factory=dict)
    max: ResourceView = field(default_factory=dict)
    weight: ResourceView = field(default_factory=dict)
    """The shared weight (Koordinator defaults it to max)."""
    lends: bool = True
    own_request: ResourceView = field(default_factory=dict)
    """What the quota's own pods ask for, masked to the resources of its max."""


@dataclass(frozen=True, slots=True)
class QuotaFigures:
    """What the calculation says of one quota."""

    child_request: Resources
    """Its pods' requests plus its children's capped requests (the ``child-request`` annotation)."""
    request: Resources
    """``child_request``, raised to min when the quota does not lend (the ``request`` annotation)."""
    limited_request: Resources
    """``request`` capped at max: what it asks of its parent."""
    min: Resources
    """Its min after scaling."""
    runtime: Resources
    """What it may use now, in every resource its parent shares out."""


def _add(into: Resources, more: ResourceView) -> None:
    for r, v in more.items():
        into[r] = into.get(r, 0) + v


@dataclass(frozen=True, slots=True)
class _Requests:
    child: dict[str, Resources] = field(default_factory=dict)
    request: dict[str, Resources] = field(default_factory=dict)
    limited: dict[str, Resources] = field(default_factory=dict)


def _requests(
    quotas: Mapping[str, QuotaInput], children: Mapping[str, list[str]], tops: Sequence[str]
) -> _Requests:
    """The requests of every quota under ``tops``, bottom up (iteratively: trees may be deep)."""
    out = _Requests()
    order: list[str] = []
    stack = list(tops)
    while stack:
        n = stack.pop()
        if n in out.child or n in order:
            continue
        order.append(n)
        stack.extend(children.get(n, ()))
    for n in reversed(order):
        q = quotas.get(n)
        child_request: Resources = dict(q.own_request) if q is not None else {}
        for c in children.get(n, ()):
            _add(child_request, out.limited[c])
        request = dict(child_request)
        if q is not None and not q.lends:
            for r, v in q.min.items():
                if v > request.get(r, 0):
                    request[r] = v
        limited = dict(request)
        if q is not None:
            for r, v in request.items():
                cap = q.max.get(r)
                if cap is not None and v > cap:
                    limited[r] = cap
        out.child[n], out.request[n], out.limited[n] = child_request, request, limited
    return out


def calculate(
    quotas: Mapping[str, QuotaInput], root: str, total: ResourceView, *, scale_min: bool = True
) -> dict[str, QuotaFigures]:
    """The figures of every quota under ``root``, the root's children sharing ``total`` in every resource
    some quota's max names (a quota in a cycle of parents is left out)."""
    children: dict[str, list[str]] = {}
    for q in quotas.values():
        if q.name != root:
            children.setdefault(q.parent, []).append(q.name)
    for kids in children.values():
        kids.sort()
    # Children of a parent that does not exist share nothing: each keeps at most its min, which is what
    # Koordinator's calculator for an unknown parent (with a total of zero) gives them.
    orphans = sorted(p for p in children if p not in quotas and p != root)
    sums = _requests(quotas, children, [root, *orphans])
    out: dict[str, QuotaFigures] = {}
    resources = sorted({r for q in quotas.values() if q.name != root for r in q.max})
    levels: list[tuple[str, ResourceView, Sequence[str]]] = [(root, total, resources)]
    for parent in orphans:
        levels.append((parent, {}, sorted({r for c in children[parent] for r in quotas[c].max})))
    while levels:
        parent, have, names = levels.pop()
        kids = children.get(parent, [])
        if not kids:
            continue
        originals = {c: quotas[c].min for c in kids}
        mins = scaled_mins(have, originals) if scale_min else {c: dict(m) for c, m in originals.items()}
        runtime: dict[str, Resources] = {c: {} for c in kids}
        for r in names:
            claims = [
                Claim(
                    c,
                    sums.limited[c].get(r, 0),
                    mins[c].get(r, 0),
                    quotas[c].weight.get(r, 0),
                    quotas[c].lends,
                )
                for c in kids
            ]
            for c, v in share_out(have.get(r, 0), claims).items():
                runtime[c][r] = v
        for c in kids:
            out[c] = QuotaFigures(sums.child[c], sums.request[c], sums.limited[c], mins[c], runtime[c])
            levels.append((c, runtime[c], sorted(quotas[c].max)))
    return out
