"""``NodeResourcesFitArgs`` and ``NodeResourcesBalancedAllocationArgs`` with kube-scheduler's defaults and
validation (``pkg/scheduler/apis/config/v1/defaults.go``, ``validation/validation_pluginargs.go``).

NodeResourcesFit scores LeastAllocated over ``cpu`` and ``memory`` (weight 1 each) unless told otherwise;
Koordinator's shipped profile adds ``kubernetes.io/batch-cpu`` and ``kubernetes.io/batch-memory``. Weights
are 1..100; a RequestedToCapacityRatio ``shape`` has utilizations 0..100 in increasing order and scores
0..10.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordshared.apis.core.resources import is_extended_resource
from koordshared.runtime.errors import InvalidArgs

LEAST, MOST, RATIO = "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"
DEFAULT_RESOURCES = (("cpu", 1), ("memory", 1))


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    type: str = LEAST
    resources: tuple[tuple[str, int], ...] = DEFAULT_RESOURCES
    shape: tuple[tuple[int, int], ...] = ()
    """RequestedToCapacityRatio only: ``(utilization 0..100, score 0..10)`` points."""


@dataclass(frozen=True, slots=True)
class FitArgs:
    ignored_resources: frozenset[str] = frozenset()
    ignored_resource_groups: frozenset[str] = frozenset()
    scoring: ScoringStrategy = ScoringStrategy()

    def ignores(self, resource: str) -> bool:
        """Whether Filter leaves ``resource`` unchecked: only extended resources can be ignored (kube-
        scheduler checks cpu, memory, hugepages and ``kubernetes.io/`` names whatever the args say)."""
        if not is_extended(resource):
            return False
        return resource in self.ignored_resources or resource.split("/", 1)[0] in self.ignored_resource_groups


is_extended = is_extended_resource


def _strict(raw: Mapping[str, Any] | None, allowed: set[str], where: str) -> dict[str, Any]:
    args = dict(raw or {})
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise InvalidArgs(f"{where}unknown field(s) {', '.join(unknown)}")
    return args


def _resources(raw: Any, where: str) -> tuple[tuple[str, int], ...]:
    if raw is None:
        return DEFAULT_RESOURCES
    if not isinstance(raw, list) or not raw:
        raise InvalidArgs(f"{where}: want a non-empty list of {{name, weight}}")
    out: list[tuple[str, int]] = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item["name"]:
            raise InvalidArgs(f"{at}: want {{name, weight}}, got {item!r}")
        _strict(item, {"name", "weight"}, f"{at}: ")
        weight = item.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise InvalidArgs(f"{at}.weight: {weight!r} must be in the range [1, 100]")
        if any(name == item["name"] for name, _ in out):
            raise InvalidArgs(f"{at}.name: duplicate resource {item['name']!r}")
        out.append((item["name"], weight))
    return tuple(out)


def _shape(raw: Any, where: str) -> tuple[tuple[int, int], ...]:
    if not isinstance(raw, list) or not raw:
        raise InvalidArgs(f"{where}: at least one point is required")
    points: list[tuple[int, int]] = []
    for i, p in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(p, Mapping):
            raise InvalidArgs(f"{at}: want {{utilization, score}}")
        _strict(p, {"utilization", "score"}, f"{at}: ")
        u, s = p.get("utilization", 0), p.get("score", 0)
        if not isinstance(u, int) or not 0 <= u <= 100:
            raise InvalidArgs(f"{at}.utilization: {u!r} must be in the range [0, 100]")
        if not isinstance(s, int) or not 0 <= s <= 10:
            raise InvalidArgs(f"{at}.score: {s!r} must be in the range [0, 10]")
        if points and u <= points[-1][0]:
            raise InvalidArgs(f"{at}.utilization: values must be sorted in increasing order")
        points.append((u, s))
    return tuple(points)


def parse_fit_args(raw: Mapping[str, Any] | None) -> FitArgs:
    args = _strict(raw, {"ignoredResources", "ignoredResourceGroups", "scoringStrategy"}, "")
    strategy = args.get("scoringStrategy") or {}
    if not isinstance(strategy, Mapping):
        raise InvalidArgs("scoringStrategy: want an object")
    s = _strict(strategy, {"type", "resources", "requestedToCapacityRatio"}, "scoringStrategy: ")
    kind = s.get("type") or LEAST
    if kind not in (LEAST, MOST, RATIO):
        raise InvalidArgs(f"scoringStrategy.type: {kind!r} is not one of {LEAST}, {MOST}, {RATIO}")
    shape: tuple[tuple[int, int], ...] = ()
    if kind == RATIO:
        ratio = s.get("requestedToCapacityRatio") or {}
        if not isinstance(ratio, Mapping):
            raise InvalidArgs("scoringStrategy.requestedToCapacityRatio: want an object")
        _strict(ratio, {"shape"}, "scoringStrategy.requestedToCapacityRatio: ")
        shape = _shape(ratio.get("shape"), "scoringStrategy.requestedToCapacityRatio.shape")
    elif s.get("requestedToCapacityRatio") is not None:
        raise InvalidArgs(f"scoringStrategy.requestedToCapacityRatio: only with type {RATIO}")
    for key in ("ignoredResources", "ignoredResourceGroups"):
        value = args.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidArgs(f"{key}: want a list of strings")
    for group in args.get("ignoredResourceGroups") or []:
        if "/" in group:
            raise InvalidArgs(f"ignoredResourceGroups: {group!r} must not contain '/'")
    return FitArgs(
        frozenset(args.get("ignoredResources") or ()),
        frozenset(args.get("ignoredResourceGroups") or ()),
        ScoringStrategy(kind, _resources(s.get("resources"), "scoringStrategy.resources"), shape),
    )


def parse_balanced_args(raw: Mapping[str, Any] | None) -> tuple[tuple[str, int], ...]:
    """``resources`` (default cpu and memory, weight 1; BalancedAllocation weighs them all alike)."""
    args = _strict(raw, {"resources"}, "")
    return _resources(args.get("resources"), "resources")
