"""The pod sweep's fast path: a whole sweep as column operations when nothing in it is unusual.

Layer: ``koordlet.metricsadvisor``. Why: after the reads, the per-target Python loop of
:mod:`koordlet.metricsadvisor.podresource` was most of what the agent spends above the C floor at 1000 pods
(issue 18 asks collection for <= 1.5x the floor). In the steady state every file reads and parses, every
target has baselines from the previous sweep, and no counter goes backwards; then the sweep is
``itemgetter`` gathers, ``map(sub)`` and a few comprehensions over whole columns, with results identical to
the loop's. Whenever any of that does not hold (a failed or malformed file, a new target, a reset, a clock
step, a rate above capacity) :meth:`Columns.sweep` returns ``None`` without changing anything and the loop,
which accounts for each case, runs instead; the baselines move between the two forms at the switch.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from koordlet import api
from koordlet.metricsadvisor.targets import POD, Target
from koordlet.system.batchread import MISSING

Gather = Callable[[Sequence[int]], tuple[int, ...]]


class Plan(NamedTuple):
    """Where one target's values sit in a sweep's results (built once per reader)."""

    is_pod: bool
    ident: str
    key: str
    """Baseline key: the kind and the ID, so a pod and a container can never share a baseline."""
    f_cpu: int
    f_mem: int
    f_thr: int
    o_cpu: int
    o_mem: int
    o_thr: int


def make_plan(v2: bool, nfiles: int, targets: Sequence[Target], offsets: Sequence[int]) -> list[Plan]:
    """The sweep plan of a reader over ``nfiles`` files per target, in ``targets``' order."""
    plan: list[Plan] = []
    for j, target in enumerate(targets):
        f0 = j * nfiles
        # v2 keeps usage and bandwidth statistics in one cpu.stat: slots usage_usec, nr_periods, ...
        f_thr, o_thr = (f0, offsets[f0] + 1) if v2 else (f0 + 2, offsets[f0 + 2])
        plan.append(
            Plan(
                is_pod=target.kind == POD,
                ident=target.ident,
                key=f"{target.kind}:{target.ident}",
                f_cpu=f0,
                f_mem=f0 + 1,
                f_thr=f_thr,
                o_cpu=offsets[f0],
                o_mem=offsets[f0 + 1],
                o_thr=o_thr,
            )
        )
    return plan


class PlanEntry(Protocol):
    """What the fast path needs of the sweep plan (``podresource._Plan``)."""

    @property
    def is_pod(self) -> bool: ...
    @property
    def ident(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def o_cpu(self) -> int: ...
    @property
    def o_mem(self) -> int: ...
    @property
    def o_thr(self) -> int: ...


class Output(NamedTuple):
    metric: str
    keys: Sequence[str]
    values: list[float]


def _gather(indices: Sequence[int]) -> Gather:
    """A C-speed gather of ``values[i]`` for ``indices`` (``itemgetter`` returns a scalar for one index)."""
    if len(indices) == 1:
        only = indices[0]
        return lambda v: (v[only],)
    if not indices:
        return lambda _v: ()
    return operator.itemgetter(*indices)


class _Group:
    """The pods or the containers of a plan: their idents, gathers and previous counters."""

    def __init__(self, entries: Sequence[PlanEntry], cpu: str, mem: str, thr: str) -> None:
        self.metrics = (cpu, mem, thr)
        # A tuple, the same every sweep: the cache then reuses its lookups (MetricCache.append_columns).
        self.idents = tuple(e.ident for e in entries)
        self.keys = [e.key for e in entries]
        self.cpu = _gather([e.o_cpu for e in entries])
        self.mem = tuple(_gather([e.o_mem + k for e in entries]) for k in range(3))
        self.periods = _gather([e.o_thr for e in entries])
        self.throttled = _gather([e.o_thr + 1 for e in entries])
        self.prev: tuple[Sequence[int], Sequence[int], Sequence[int]] = ((), (), ())


class Columns:
    """Column form of one plan; ``t_prev`` is set while every target has baselines from one sweep."""

    def __init__(self, plan: Sequence[PlanEntry], cpu_scale: int) -> None:
        self.cpu_scale = cpu_scale
        self.groups = (
            _Group(
                [e for e in plan if e.is_pod],
                api.POD_CPU_USAGE,
                api.POD_MEMORY_USAGE,
                api.POD_CPU_THROTTLED,
            ),
            _Group(
                [e for e in plan if not e.is_pod],
                api.CONTAINER_CPU_USAGE,
                api.CONTAINER_MEMORY_USAGE,
                api.CONTAINER_CPU_THROTTLED,
            ),
        )
        self.t_prev: float | None = None

    def sweep(
        self, status: Sequence[int], values: Sequence[int], t: float, max_gap: float, max_ns_per_s: float
    ) -> list[Output] | None:
        """The sweep's samples, or ``None`` (nothing changed) when the per-target loop must decide."""
        t_prev = self.t_prev
        if t_prev is None or any(status) or MISSING in values:
            return None
        dt = t - t_prev
        if not 0.0 < dt <= max_gap:
            return None
        sub, scale = operator.sub, self.cpu_scale
        limit = max_ns_per_s * dt
        computed = []
        for g in self.groups:
            ns = g.cpu(values)
            if scale != 1:
                ns = tuple(n * scale for n in ns)
            cpu_d = list(map(sub, ns, g.prev[0]))
            periods, throttled = g.periods(values), g.throttled(values)
            per_d = list(map(sub, periods, g.prev[1]))
            thr_d = list(map(sub, throttled, g.prev[2]))
            if cpu_d and (min(cpu_d) < 0 or max(cpu_d) > limit or min(per_d) < 0 or min(thr_d) < 0):
                return None
            computed.append((g, ns, periods, throttled, cpu_d, per_d, thr_d))
        out: list[Output] = []
        denom = dt * 1e9
        for g, ns, periods, throttled, cpu_d, per_d, thr_d in computed:
            ga, gb, gc = g.mem
            cpu_m, mem_m, thr_m = g.metrics
            out.append(Output(cpu_m, g.idents, [d / denom for d in cpu_d]))
            out.append(
                Output(
                    mem_m,
                    g.idents,
                    [float(a + b + c) for a, b, c in zip(ga(values), gb(values), gc(values), strict=True)],
                )
            )
            out.append(
                Output(
                    thr_m, g.idents, [dt_ / dp if dp else 0.0 for dp, dt_ in zip(per_d, thr_d, strict=True)]
                )
            )
            g.prev = (ns, periods, throttled)
        self.t_prev = t
        return out

    def to_dicts(
        self, cpu_base: dict[str, tuple[float, int]], thr_base: dict[str, tuple[float, int, int]]
    ) -> None:
        """Hand the baselines to the per-target loop (which keeps them by key) and leave the fast path."""
        t = self.t_prev
        if t is None:
            return
        for g in self.groups:
            ns, periods, throttled = g.prev
            for key, n, p, th in zip(g.keys, ns, periods, throttled, strict=True):
                cpu_base[key] = (t, n)
                thr_base[key] = (t, p, th)
        self.t_prev = None

    def from_dicts(
        self, cpu_base: dict[str, tuple[float, int]], thr_base: dict[str, tuple[float, int, int]], t: float
    ) -> None:
        """Take the loop's baselines when every target got both from the sweep at ``t``."""
        prevs = []
        for g in self.groups:
            cpu = [cpu_base.get(k) for k in g.keys]
            thr = [thr_base.get(k) for k in g.keys]
            if any(c is None or c[0] != t for c in cpu) or any(x is None or x[0] != t for x in thr):
                self.t_prev = None
                return
            prevs.append(
                (
                    tuple(c[1] for c in cpu if c is not None),
                    tuple(x[1] for x in thr if x is not None),
                    tuple(x[2] for x in thr if x is not None),
                )
            )
        for g, prev in zip(self.groups, prevs, strict=True):
            g.prev = prev
        self.t_prev = t
