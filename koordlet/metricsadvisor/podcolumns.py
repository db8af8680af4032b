"""The pod sweep's arithmetic: one sweep's batch-read values into CPU, memory and throttling samples.

Layer: ``koordlet.metricsadvisor``. :class:`Columns` keeps the baselines of every target of one sweep plan
by plan position (pods first, then containers) and computes the rates in two ways: :meth:`Columns.sweep`,
whole columns at once when nothing in the sweep is unusual (one C call over the C reader's buffers, the
baselines then kept in C arrays; ``itemgetter`` gathers and ``map(sub)`` over the pure-Python reader's
lists), and :meth:`Columns.sweep_checked`, target by target, which accounts for each unusual case (a gone
or malformed file, a missing baseline, a reset, a clock step, a rate above capacity). All give the same
samples; the column sweep answers ``None`` without changing anything when it cannot.
"""

from __future__ import annotations

import errno
import operator
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import islice, repeat
from typing import NamedTuple

from koordlet import api
from koordlet.api.metrics import CONTAINER_MEMORY_USAGE_WITH_PAGE_CACHE, POD_MEMORY_USAGE_WITH_PAGE_CACHE
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.targets import POD, Target
from koordlet.system import native
from koordlet.system.batchread import GONE_STATUSES, MISSING, BatchReader

Gather = Callable[[Sequence[int]], tuple[int, ...]]
_MALFORMED_STATUSES = frozenset({-errno.EINVAL, -errno.ERANGE, -errno.EOVERFLOW})


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


def plan_entry(v2: bool, nfiles: int, j: int, target: Target, offsets: Sequence[int]) -> Plan:
    """The plan entry of ``target`` as the ``j``-th target of a reader over ``nfiles`` files per target."""
    f0 = j * nfiles
    # v2 keeps usage and bandwidth statistics in one cpu.stat: slots usage_usec, nr_periods, ...
    f_thr, o_thr = (f0, offsets[f0] + 1) if v2 else (f0 + 2, offsets[f0 + 2])
    return Plan(
        target.kind == POD,
        target.ident,
        f"{target.kind}:{target.ident}",
        f0,
        f0 + 1,
        f_thr,
        offsets[f0],
        offsets[f0 + 1],
        o_thr,
    )


def make_plan(v2: bool, nfiles: int, targets: Sequence[Target], offsets: Sequence[int]) -> list[Plan]:
    """The sweep plan of a reader over ``nfiles`` files per target, in ``targets``' order."""
    return [plan_entry(v2, nfiles, j, target, offsets) for j, target in enumerate(targets)]


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


def classify(status: int) -> str:
    """The error kind of a failed read."""
    if status in GONE_STATUSES:
        return fw.ERR_GONE
    if status in _MALFORMED_STATUSES:
        return fw.ERR_MALFORMED
    return fw.ERR_READ


_IS_POD = operator.itemgetter(0)
_IDENT = operator.attrgetter("ident")
_O_CPU = operator.attrgetter("o_cpu")
_O_MEM = operator.attrgetter("o_mem")
_O_THR = operator.attrgetter("o_thr")


def _plus(indices: list[int], k: int) -> list[int]:
    return list(map(operator.add, indices, repeat(k, len(indices))))


class _Group:
    """The pods or the containers of a plan (a slice of it): their idents and gathers. Built with C loops
    (``map``), as it is again after every change of the plan."""

    def __init__(self, entries: Sequence[Plan], start: int, cpu: str, mem: str, thr: str) -> None:
        self.metrics = (cpu, mem, thr)
        self.start = start
        """Plan position of the group's first entry."""
        # A tuple, the same every sweep: the cache then reuses its lookups (MetricCache.append_columns).
        self.idents: tuple[str, ...] = tuple(map(_IDENT, entries))
        self.cpu = _gather(list(map(_O_CPU, entries)))
        o_mem: list[int] = list(map(_O_MEM, entries))
        self.mem = (_gather(o_mem), _gather(_plus(o_mem, 1)), _gather(_plus(o_mem, 2)))
        o_thr: list[int] = list(map(_O_THR, entries))
        self.periods = _gather(o_thr)
        self.throttled = _gather(_plus(o_thr, 1))


class Columns:
    """One plan's baselines and the sweep's arithmetic. ``plan`` lists the pods first; ``carried`` (the
    previous plan's columns) hands over the baselines of the targets both plans have.

    A plan can also follow its reader's in-place changes (:meth:`swap`, :meth:`pop`, :meth:`append`, then
    :meth:`regroup`): a pod coming or going then costs a few entries, not a new plan of every target."""

    def __init__(
        self,
        plan: Sequence[Plan],
        cpu_scale: int,
        carried: Columns | None = None,
        fast: native.NativeSweep | None = None,
    ) -> None:
        self.plan = list(plan)
        self.cpu_scale = cpu_scale
        self._fast = fast
        """The C column sweep over the reader's own buffers (the C reader's), else the sweep in Python."""
        self._in_c = False
        """The baselines are in ``_fast``'s arrays (moved there by a C sweep): the lists here are stale."""
        self.regroup()
        n = len(plan)
        # Baselines by plan position: the CPU counter (ns) and the throttling counters, each with the time
        # it was read (None: no baseline).
        self.cpu_ns: Sequence[int] = [0] * n
        self.periods: Sequence[int] = [0] * n
        self.throttled: Sequence[int] = [0] * n
        self.cpu_t: list[float | None] = [None] * n
        self.thr_t: list[float | None] = [None] * n
        self.t_prev: float | None = None
        """Set while every target but the ``fresh`` ones holds both baselines from the sweep at that time;
        the per-position times are then not kept up to date (the fast path does not write them)."""
        self.fresh: set[int] = set()
        """Plan positions of the targets added since the sweep at ``t_prev`` (no baselines yet): the fast
        path still runs, giving them what the checked sweep gives a new target (memory only)."""
        if carried is not None:
            self._carry(carried)

    def regroup(self) -> None:
        """The pod and container groups of the plan as it now is (after :meth:`swap`/:meth:`pop`/
        :meth:`append`, which leave them stale until this is called)."""
        plan = self.plan
        pods = sum(map(_IS_POD, plan))
        if any(map(_IS_POD, islice(plan, pods, None))):
            raise ValueError("the plan must list the pods first")
        fast = self._fast
        if fast is not None:
            if self._in_c:
                self._counts()  # a new plan clears the C baselines: the lists take them back first
            fast.plan(list(map(_O_CPU, plan)), list(map(_O_MEM, plan)), list(map(_O_THR, plan)))
        self.groups = (
            _Group(plan[:pods], 0, api.POD_CPU_USAGE, api.POD_MEMORY_USAGE, api.POD_CPU_THROTTLED),
            _Group(
                plan[pods:],
                pods,
                api.CONTAINER_CPU_USAGE,
                api.CONTAINER_MEMORY_USAGE,
                api.CONTAINER_CPU_THROTTLED,
            ),
        )

    def _counts(self) -> tuple[list[int], list[int], list[int]]:
        """The baseline counters as lists (the fast sweep leaves tuples, or its C arrays)."""
        if self._in_c:
            assert self._fast is not None
            self.cpu_ns, self.periods, self.throttled = self._fast.baselines()
            self._in_c = False
        elif not isinstance(self.cpu_ns, list):
            self.cpu_ns, self.periods, self.throttled = (
                list(self.cpu_ns),
                list(self.periods),
                list(self.throttled),
            )
        cpu_ns, periods, throttled = self.cpu_ns, self.periods, self.throttled
        assert isinstance(cpu_ns, list) and isinstance(periods, list) and isinstance(throttled, list)
        return cpu_ns, periods, throttled

    def _baselines(self) -> tuple[list[int], list[int], list[int]]:
        self._expand()
        return self._counts()

    def swap(self, i: int, j: int) -> None:
        """Targets ``i`` and ``j`` trade places with their baselines, as their files did in the reader
        (each place keeps its offsets: the files there have the same kinds and keys)."""
        if i == j:
            return
        plan = self.plan
        a, b = plan[i], plan[j]
        plan[i] = Plan(b.is_pod, b.ident, b.key, *a[3:])
        plan[j] = Plan(a.is_pod, a.ident, a.key, *b[3:])
        for counts in self._counts():
            counts[i], counts[j] = counts[j], counts[i]
        if self.t_prev is None:
            for times in (self.cpu_t, self.thr_t):
                times[i], times[j] = times[j], times[i]
            return
        fresh = self.fresh
        in_i, in_j = i in fresh, j in fresh
        if in_i != in_j:
            fresh.symmetric_difference_update((i, j))

    def pop(self) -> None:
        """Drop the last target and its baselines."""
        self.plan.pop()
        for counts in self._counts():
            counts.pop()
        if self.t_prev is None:
            self.cpu_t.pop()
            self.thr_t.pop()
        else:
            self.fresh.discard(len(self.plan))

    def append(self, entry: Plan) -> None:
        """A new last target, without baselines."""
        self.plan.append(entry)
        for counts in self._counts():
            counts.append(0)
        if self.t_prev is None:
            self.cpu_t.append(None)
            self.thr_t.append(None)
        else:
            self.fresh.add(len(self.plan) - 1)

    def _carry(self, old: Columns) -> None:
        old._expand()
        at = {e.key: j for j, e in enumerate(old.plan)}
        cpu_ns, periods, throttled = list(self.cpu_ns), list(self.periods), list(self.throttled)
        for j, e in enumerate(self.plan):
            i = at.get(e.key)
            if i is not None:
                cpu_ns[j], periods[j], throttled[j] = old.cpu_ns[i], old.periods[i], old.throttled[i]
                self.cpu_t[j], self.thr_t[j] = old.cpu_t[i], old.thr_t[i]
        self.cpu_ns, self.periods, self.throttled = cpu_ns, periods, throttled

    def _expand(self) -> None:
        """Per-position times and lists the checked sweep can write (after fast sweeps)."""
        t_prev = self.t_prev
        if t_prev is not None:
            n = len(self.plan)
            self.cpu_t, self.thr_t = [t_prev] * n, [t_prev] * n
            for j in self.fresh:
                self.cpu_t[j] = self.thr_t[j] = None
            self.fresh = set()
            self.t_prev = None
        self._counts()

    def sweep(
        self, reader: BatchReader, t: float, max_gap: float, max_ns_per_s: float
    ) -> list[Output] | None:
        """The samples of ``reader``'s last fill (one without a failed file) as whole columns, or ``None``
        (nothing changed) when the checked sweep must decide: a missing value or baseline (but those of
        the targets new since the last sweep), a clock step, a reset, a rate above capacity."""
        t_prev = self.t_prev
        if t_prev is None:
            return None
        dt = t - t_prev
        if not 0.0 < dt <= max_gap:
            return None
        fast = self._fast
        if fast is None:
            parts = self._sweep_lists(reader.results().values, dt, max_ns_per_s * dt)
        else:
            if not self._in_c:
                if not fast.load(self.cpu_ns, self.periods, self.throttled, self.fresh):
                    return None
                self._in_c = True
            got = fast.run(self.cpu_scale, dt, max_ns_per_s * dt)
            if got is None:
                return None
            cpu_v, mem_v, thr_v = got
            parts = []
            for g in self.groups:
                lo, hi = g.start, g.start + len(g.idents)
                parts.append((g, cpu_v[lo:hi], mem_v[lo:hi], thr_v[lo:hi]))
        if parts is None:
            return None
        fresh = self.fresh
        out: list[Output] = []
        for g, cpu_v, mem_v, thr_v in parts:
            cpu_m, mem_m, thr_m = g.metrics
            rated: Sequence[str] = g.idents
            # a new target has no rate yet: its memory only
            new = sorted((j - g.start for j in fresh if 0 <= j - g.start < len(rated)), reverse=True)
            if new:
                rated = list(rated)
                for k in new:  # from the last: each deletion leaves the places before it
                    del rated[k], cpu_v[k], thr_v[k]
            out.append(Output(cpu_m, rated, cpu_v))
            out.append(Output(mem_m, g.idents, mem_v))
            out.append(Output(thr_m, rated, thr_v))
        self.t_prev = t
        self.fresh = set()
        return out

    def _sweep_lists(
        self, values: Sequence[int], dt: float, limit: float
    ) -> list[tuple[_Group, list[float], list[float], list[float]]] | None:
        """The column sweep in Python (the pure-Python reader's): each group's CPU rates, memory and
        throttled ratios, the baselines moved on; ``None`` with nothing changed as :meth:`sweep` says."""
        if MISSING in values:
            return None
        sub, scale = operator.sub, self.cpu_scale
        fresh = self.fresh
        computed = []
        for g in self.groups:
            ns = g.cpu(values)
            if scale != 1:
                ns = tuple(n * scale for n in ns)
            # map stops at the group's end; islice skips the groups before it without a copy
            cpu_d = list(map(sub, ns, islice(self.cpu_ns, g.start, None)))
            periods, throttled = g.periods(values), g.throttled(values)
            per_d = list(map(sub, periods, islice(self.periods, g.start, None)))
            thr_d = list(map(sub, throttled, islice(self.throttled, g.start, None)))
            # a new target has no rate to check (its values are dropped by the caller)
            for k in (j - g.start for j in fresh if 0 <= j - g.start < len(ns)):
                cpu_d[k] = per_d[k] = thr_d[k] = 0
            if cpu_d and (min(cpu_d) < 0 or max(cpu_d) > limit or min(per_d) < 0 or min(thr_d) < 0):
                return None
            computed.append((g, ns, periods, throttled, cpu_d, per_d, thr_d))
        parts = []
        denom = dt * 1e9
        for g, _ns, _periods, _throttled, cpu_d, per_d, thr_d in computed:
            ga, gb, gc = g.mem
            parts.append(
                (
                    g,
                    [d / denom for d in cpu_d],
                    [float(a + b + c) for a, b, c in zip(ga(values), gb(values), gc(values), strict=True)],
                    [dt_ / dp if dp else 0.0 for dp, dt_ in zip(per_d, thr_d, strict=True)],
                )
            )
        (_, ns_p, per_p, thr_p, *_), (_, ns_c, per_c, thr_c, *_) = computed
        self.cpu_ns, self.periods, self.throttled = ns_p + ns_c, per_p + per_c, thr_p + thr_c
        return parts

    def sweep_checked(
        self,
        status: Sequence[int],
        values: Sequence[int],
        t: float,
        max_gap: float,
        max_ns_per_s: float,
        *,
        v2: bool,
        page_cache: bool,
    ) -> tuple[list[Output], Counter[str]]:
        """The sweep target by target: the samples (pods' CPU, memory, throttling, the containers' the same,
        then the memory with page cache when asked for) and the errors by kind.

        A cgroup whose CPU file vanished yields no sample at all (never a zero) and loses its baselines;
        if only its memory or cpu hierarchy is gone (v1 teardown goes one hierarchy at a time), the series
        still readable are kept. A malformed file is counted and only that series is skipped. Written flat
        (locals, no helper calls on the common path): it runs for every target when the fast path cannot."""
        cpu_ns, periods_b, throttled_b = self._baselines()
        cpu_t, thr_t = self.cpu_t, self.thr_t
        cpu_scale = self.cpu_scale
        errs: Counter[str] = Counter()
        resets = steps = 0
        # Keys and values in separate lists (cache.append_columns): no tuple per sample to allocate.
        pod_cpu_k: list[str] = []
        pod_cpu_v: list[float] = []
        pod_mem_k: list[str] = []
        pod_mem_v: list[float] = []
        pod_thr_k: list[str] = []
        pod_thr_v: list[float] = []
        cont_cpu_k: list[str] = []
        cont_cpu_v: list[float] = []
        cont_mem_k: list[str] = []
        cont_mem_v: list[float] = []
        cont_thr_k: list[str] = []
        cont_thr_v: list[float] = []
        pod_pc_k: list[str] = []
        pod_pc_v: list[float] = []
        cont_pc_k: list[str] = []
        cont_pc_v: list[float] = []
        for j, (is_pod, ident, _key, f_cpu, f_mem, f_thr, o_cpu, o_mem, o_thr) in enumerate(self.plan):
            s_cpu, s_mem, s_thr = status[f_cpu], status[f_mem], status[f_thr]
            if s_cpu or s_mem or s_thr:
                if s_cpu in GONE_STATUSES:
                    # the CPU file exists in every live cgroup: the cgroup itself is gone
                    errs[fw.ERR_GONE] += 1
                    cpu_t[j] = thr_t[j] = None
                    continue
                if s_mem in GONE_STATUSES or s_thr in GONE_STATUSES:
                    # v1 teardown removes the hierarchies one by one; or a v2 cgroup without the memory
                    # controller: the series still readable are valid, the others are skipped
                    errs[fw.ERR_FILE_MISSING] += 1
            # CPU
            ns = values[o_cpu]
            if s_cpu:
                errs[classify(s_cpu)] += 1
            elif ns == MISSING:
                errs[fw.ERR_MALFORMED] += 1
            else:
                ns *= cpu_scale
                prev_t, prev_ns = cpu_t[j], cpu_ns[j]
                cpu_t[j], cpu_ns[j] = t, ns
                if prev_t is not None:
                    dt = t - prev_t
                    delta = ns - prev_ns
                    if not 0.0 < dt <= max_gap:
                        steps += 1
                    elif delta < 0:
                        resets += 1
                    elif delta > max_ns_per_s * dt:
                        errs[fw.ERR_OVER_CAPACITY] += 1
                    elif is_pod:
                        pod_cpu_k.append(ident)
                        pod_cpu_v.append(delta / (dt * 1e9))
                    else:
                        cont_cpu_k.append(ident)
                        cont_cpu_v.append(delta / (dt * 1e9))
            # memory
            if s_mem:
                if s_mem not in GONE_STATUSES:
                    errs[classify(s_mem)] += 1
            else:
                a, b, c = values[o_mem], values[o_mem + 1], values[o_mem + 2]
                if MISSING in (a, b, c):
                    errs[fw.ERR_MALFORMED] += 1
                elif is_pod:
                    pod_mem_k.append(ident)
                    pod_mem_v.append(float(a + b + c))
                else:
                    cont_mem_k.append(ident)
                    cont_mem_v.append(float(a + b + c))
                if page_cache and MISSING not in (a, b, c):
                    af, inf = values[o_mem + 3], values[o_mem + 4]
                    if MISSING not in (af, inf):
                        (pod_pc_k if is_pod else cont_pc_k).append(ident)
                        (pod_pc_v if is_pod else cont_pc_v).append(float(a + b + c + af + inf))
            # throttling
            if s_thr:
                if s_thr in GONE_STATUSES:
                    thr_t[j] = None
                elif not v2:
                    errs[classify(s_thr)] += 1
                continue
            periods, throttled = values[o_thr], values[o_thr + 1]
            if MISSING in (periods, throttled):
                # v2 without the cpu controller has neither key: no bandwidth control, nothing to report
                if not (v2 and periods == throttled):
                    errs[fw.ERR_MALFORMED] += 1
                continue
            prev_t, prev_p, prev_th = thr_t[j], periods_b[j], throttled_b[j]
            thr_t[j], periods_b[j], throttled_b[j] = t, periods, throttled
            if prev_t is None:
                continue
            dt = t - prev_t
            dperiods, dthrottled = periods - prev_p, throttled - prev_th
            if not 0.0 < dt <= max_gap:
                steps += 1
            elif dperiods < 0 or dthrottled < 0:
                resets += 1
            elif is_pod:
                pod_thr_k.append(ident)
                pod_thr_v.append(dthrottled / dperiods if dperiods else 0.0)
            else:
                cont_thr_k.append(ident)
                cont_thr_v.append(dthrottled / dperiods if dperiods else 0.0)
        if resets:
            errs[fw.ERR_COUNTER_RESET] += resets
        if steps:
            errs[fw.ERR_CLOCK] += steps
        # every target has both baselines from this sweep: the next sweep may take the fast path
        if all(x == t for x in cpu_t) and all(x == t for x in thr_t):
            self.t_prev = t
        return [
            Output(api.POD_CPU_USAGE, pod_cpu_k, pod_cpu_v),
            Output(api.POD_MEMORY_USAGE, pod_mem_k, pod_mem_v),
            Output(api.POD_CPU_THROTTLED, pod_thr_k, pod_thr_v),
            Output(api.CONTAINER_CPU_USAGE, cont_cpu_k, cont_cpu_v),
            Output(api.CONTAINER_MEMORY_USAGE, cont_mem_k, cont_mem_v),
            Output(api.CONTAINER_CPU_THROTTLED, cont_thr_k, cont_thr_v),
            Output(POD_MEMORY_USAGE_WITH_PAGE_CACHE, pod_pc_k, pod_pc_v),
            Output(CONTAINER_MEMORY_USAGE_WITH_PAGE_CACHE, cont_pc_k, cont_pc_v),
        ], errs
