"""What LowNodeLoad knows of a node in one round: its usage from the NodeMetric, its thresholds
(absolute or around the pool's mean) and its class (Koordinator's ``utilization_util.go``).

Units: cpu in millicores, memory in bytes, ``pods`` a count, all integers as Koordinator's
``Quantity.MilliValue()``/``Value()`` make them. Capacity is the node's raw allocatable (the
``node.koordinator.sh/raw-allocatable`` annotation if it parses, else ``status.allocatable``).
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from koord.descheduler.framework.interface import Obj
from koordshared.apis.core.node import is_unschedulable, node_name
from koordshared.apis.core.pod import pod_key
from koordshared.apis.core.resources import node_allocatable, value_of
from koordshared.apis.slo.nodemetric import parse_status

Vec = dict[str, int]
MIN_PCT, MAX_PCT = 0.0, 100.0


@dataclass(frozen=True, slots=True)
class Reported:
    """A NodeMetric status reduced to what LowNodeLoad reads (memoized per NodeMetric object)."""

    update_time: float | None
    has_node_metric: bool
    system: tuple[int, int]
    pods: Mapping[str, tuple[int, int]]
    """``namespace/name`` -> (cpu millicores, memory bytes)."""


def reported(node_metric: Obj) -> Reported:
    raw = node_metric.get("status")
    status = parse_status(raw)
    sys_usage = status.system_usage
    return Reported(
        update_time=status.update_time,
        has_node_metric=isinstance(raw, Mapping) and isinstance(raw.get("nodeMetric"), Mapping),
        system=(sys_usage.cpu_milli, sys_usage.memory_bytes) if sys_usage else (0, 0),
        pods={
            f"{p.namespace}/{p.name}": (p.usage.cpu_milli, p.usage.memory_bytes) for p in status.pods_metric
        },
    )


def metric_vec(values: tuple[int, int], names: Iterable[str]) -> Vec:
    """A reported (cpu, memory) pair as a vector over ``names`` (0 for anything else)."""
    return {r: values[0] if r == "cpu" else values[1] if r == "memory" else 0 for r in names}


@dataclass(slots=True)
class NodeUsage:
    node: Obj
    name: str
    capacity: Vec
    pods: list[Obj]
    prod_pods: list[Obj]
    usage: Vec
    prod_usage: Vec
    pod_metrics: Mapping[str, tuple[int, int]]
    low: Vec = field(default_factory=dict)
    high: Vec = field(default_factory=dict)
    prod_low: Vec = field(default_factory=dict)
    prod_high: Vec = field(default_factory=dict)

    def view(self, prod: bool) -> tuple[Vec, Vec]:
        """(usage, high thresholds) of the node view or the prod view."""
        return (self.prod_usage, self.prod_high) if prod else (self.usage, self.high)

    def percent(self, resource: str, prod: bool) -> float:
        cap = self.capacity.get(resource, 0)
        used = (self.prod_usage if prod else self.usage).get(resource, 0)
        return 100.0 * used / cap if cap else 0.0


def capacity_of(node: Obj, names: Iterable[str]) -> Vec:
    alloc = node_allocatable(node)
    return {r: value_of(r, alloc[r]) if r in alloc else 0 for r in names}


def node_usages(
    nodes: Sequence[Obj],
    names: Sequence[str],
    *,
    node_metric: Callable[[str], Obj | None],
    pods_on_node: Callable[[str], list[Obj]],
    is_prod: Callable[[Obj], bool],
    reported_of: Callable[[Obj], Reported],
    now: float,
    expiration_seconds: float,
) -> tuple[list[NodeUsage], dict[str, str]]:
    """The usage of every node with a fresh NodeMetric, and why each other node was left out."""
    out: list[NodeUsage] = []
    skipped: dict[str, str] = {}
    for node in nodes:
        name = node_name(node)
        nm = node_metric(name)
        if nm is None:
            skipped[name] = "no NodeMetric"
            continue
        rep = reported_of(nm)
        if not rep.has_node_metric:
            skipped[name] = "NodeMetric has no status.nodeMetric"
            continue
        if rep.update_time is None or now - rep.update_time >= expiration_seconds:
            skipped[name] = f"NodeMetric expired (older than {expiration_seconds:g}s)"
            continue
        pods = pods_on_node(name)
        prod_pods = [p for p in pods if is_prod(p)]
        prod_keys = {pod_key(p) for p in prod_pods}
        # Pods gone since the report (evicted, deleted) no longer load the node: leave them out.
        bound = {pod_key(p) for p in pods}
        live = {k: u for k, u in rep.pods.items() if k in bound}
        cpu = rep.system[0] + sum(u[0] for u in live.values())
        mem = rep.system[1] + sum(u[1] for u in live.values())
        prod_cpu = sum(u[0] for k, u in rep.pods.items() if k in prod_keys)
        prod_mem = sum(u[1] for k, u in rep.pods.items() if k in prod_keys)
        usage = metric_vec((cpu, mem), names)
        prod_usage = metric_vec((prod_cpu, prod_mem), names)
        usage["pods"], prod_usage["pods"] = len(pods), len(prod_pods)
        out.append(
            NodeUsage(
                node, name, capacity_of(node, (*names, "pods")), pods, prod_pods, usage, prod_usage, live
            )
        )
    return out, skipped


def _threshold(capacity: int, pct: float) -> int:
    return int(pct * 0.01 * capacity)  # Go: int64(float64(pct) * 0.01 * float64(capacity))


def _clamp(pct: float) -> float:
    return min(max(pct, MIN_PCT), MAX_PCT)


def mean_percent(usages: Sequence[NodeUsage], prod: bool) -> dict[str, float]:
    """``calcAverageResourceUsagePercent``: the mean over the nodes of usage/capacity * 100 (a node of
    zero capacity adds 0 but still counts in the mean)."""
    totals: dict[str, float] = {}
    for u in usages:
        for r, used in (u.prod_usage if prod else u.usage).items():
            cap = u.capacity.get(r, 0)
            if cap:
                totals[r] = totals.get(r, 0.0) + used / cap * 100.0
    return {r: t / len(usages) for r, t in totals.items()} if usages else {}


def set_thresholds(
    usages: Sequence[NodeUsage],
    names: Sequence[str],
    pcts: Mapping[str, Mapping[str, float]],
    deviation: bool,
) -> None:
    """Fill every node's four threshold vectors; ``pcts`` holds the completed ``low``, ``high``,
    ``prod_low`` and ``prod_high`` percentages."""
    means = {False: mean_percent(usages, False), True: mean_percent(usages, True)} if deviation else {}
    for u in usages:
        for prod, low_key, high_key in ((False, "low", "high"), (True, "prod_low", "prod_high")):
            low_vec: Vec = {}
            high_vec: Vec = {}
            for r in names:
                cap = u.capacity.get(r, 0)
                low_pct, high_pct = pcts[low_key][r], pcts[high_key][r]
                if not deviation:
                    low_vec[r], high_vec[r] = _threshold(cap, low_pct), _threshold(cap, high_pct)
                elif low_pct == MIN_PCT:
                    low_vec[r] = high_vec[r] = cap
                else:
                    mean = means[prod].get(r, 0.0)
                    low_vec[r] = _threshold(cap, _clamp(mean - low_pct))
                    high_vec[r] = _threshold(cap, _clamp(mean + high_pct))
            setattr(u, low_key, low_vec)
            setattr(u, high_key, high_vec)


def over(usage: Mapping[str, int], thresholds: Mapping[str, int]) -> list[str]:
    """The resources above their threshold (the node is over when any is)."""
    return [r for r, thr in thresholds.items() if r in usage and usage[r] > thr]


def under(usage: Mapping[str, int], thresholds: Mapping[str, int]) -> bool:
    """Every resource at or below its threshold."""
    return all(usage[r] <= thr for r, thr in thresholds.items() if r in usage)


@dataclass(slots=True)
class Classes:
    low: list[NodeUsage] = field(default_factory=list)
    source: list[NodeUsage] = field(default_factory=list)
    prod_low: list[NodeUsage] = field(default_factory=list)
    prod_high: list[NodeUsage] = field(default_factory=list)
    both_low: list[NodeUsage] = field(default_factory=list)

    def of(self, name: str) -> str:
        for what in ("source", "prod_high", "low", "both_low", "prod_low"):
            if any(u.name == name for u in getattr(self, what)):
                return what
        return "appropriate"


def classify(usages: Sequence[NodeUsage]) -> Classes:
    """``classifyNodes``: "low" filters also need a schedulable node; see the module docstring."""
    out = Classes()
    for u in usages:
        schedulable = not is_unschedulable(u.node)
        prod_over = bool(over(u.prod_usage, u.prod_high))
        prod_under = schedulable and under(u.prod_usage, u.prod_low)
        if schedulable and under(u.usage, u.low):
            if prod_over:
                out.prod_high.append(u)
            elif prod_under:
                out.both_low.append(u)
            else:
                out.low.append(u)
        elif over(u.usage, u.high):
            out.source.append(u)
        elif prod_over:
            out.prod_high.append(u)
        elif prod_under:
            out.prod_low.append(u)
    return out


def complete_thresholds(
    deviation: bool,
    low: Mapping[str, float],
    high: Mapping[str, float],
    prod_low: Mapping[str, float],
    prod_high: Mapping[str, float],
) -> tuple[list[str], dict[str, dict[str, float]]]:
    """``newThresholds``: the four maps over the union of their names plus memory. A resource missing
    from ``low`` gets 100 % (0 % in deviation mode) as both low and high, replacing a given high; the
    same for the prod pair. Returns the resource names (sorted) and the completed maps."""
    names = sorted({*low, *high, *prod_low, *prod_high, "memory"})
    fill = MIN_PCT if deviation else MAX_PCT
    out: dict[str, dict[str, float]] = {
        "low": dict(low),
        "high": dict(high),
        "prod_low": dict(prod_low),
        "prod_high": dict(prod_high),
    }
    for r in names:
        if r not in low:
            out["low"][r] = out["high"][r] = fill
        if r not in prod_low:
            out["prod_low"][r] = out["prod_high"][r] = fill
    return names, out
