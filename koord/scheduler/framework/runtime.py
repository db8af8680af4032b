"""The framework runtime: builds the profile's plugins from the registry and runs the extension points
(kube-scheduler's ``frameworkImpl``), answering in the extender's terms.

Filter runs plugin by plugin over the nodes still feasible, so a node is reported with the first plugin
(in profile order) that rejects it, as kube-scheduler's node-by-node loop would. Scores are combined
as documented in :func:`combine_scores`. A plugin that raises, or returns an ``ERROR`` status, fails
the call with :class:`PluginFailure`; the extender answers that call with an error and nothing else.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from koord.runtime.errors import PluginError
from koord.runtime.pluginset import build_plugin, check_plugin_config, refuse_duplicates
from koord.scheduler.framework.interface import (
    EXTENSION_POINTS,
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    Code,
    CycleState,
    Handle,
    NodeDebugPlugin,
    NodeInfo,
    Obj,
    Status,
)
from koord.scheduler.framework.profile import MULTI_POINT, PluginRef, Profile
from koord.scheduler.framework.registry import Registry

log = logging.getLogger(__name__)

_SKIP_FILTER = "koord.scheduler/skip-filter"

Timer = Callable[[str, str, float], None]
"""``(plugin, extension point, seconds)`` after each plugin's pass over the nodes of one call."""


class PluginFailure(Exception):
    """A plugin raised or answered ``ERROR``: the current call fails (and only it)."""

    def __init__(self, plugin: str, point: str, message: str) -> None:
        super().__init__(f"plugin {plugin} failed at {point}: {message}")
        self.plugin = plugin
        self.point = point


@dataclass(frozen=True, slots=True)
class Enabled:
    plugin: Any
    weight: int = 1

    @property
    def name(self) -> str:
        return str(self.plugin.name)


@dataclass(slots=True)
class FilterOutcome:
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    rejected_by: dict[str, int] = field(default_factory=dict)
    """Plugin name -> how many nodes it rejected in this call."""


def combine_scores(
    weighted: Sequence[tuple[int, Sequence[int]]], count: int, total_weight: int | None = None
) -> list[int]:
    """The extender's 0..10 from plugin scores: ``round(sum w_p*s_p / (10 * sum w_p))``, half up.

    ``weighted`` holds each plugin's weight and its 0..100 scores, one per node in order. ``s_p`` is
    plugin p's score and ``w_p`` its weight; the weighted mean (0..100) is divided by 10 because
    kube-scheduler multiplies extender scores by ``weight * 10``. The extender's own ``weight`` in
    kube-scheduler's config therefore plays the part of a plugin weight, and our plugin weights set
    proportions among our plugins only. ``total_weight`` (default: the weights given) counts every
    enabled score plugin, so a plugin skipped for the pod counts as a zero score.
    """
    tw = sum(w for w, _ in weighted) if total_weight is None else total_weight
    if tw <= 0 or not weighted:
        return [0] * count
    if len(weighted) == 1:  # the common case, without the inner loop
        w, scores = weighted[0]
        return [(2 * w * s + 10 * tw) // (20 * tw) for s in scores]
    acc = [0] * count
    for w, scores in weighted:
        for i, s in enumerate(scores):
            acc[i] += w * s
    return [(2 * a + 10 * tw) // (20 * tw) for a in acc]


class Framework:
    """One profile's plugins, built once at start; every method is safe to call from many threads as
    long as the plugins are."""

    def __init__(self, profile: Profile, registry: Registry, handle: Handle, *, timer: Timer | None = None):
        self.profile = profile
        self._timer = timer
        self.instances: dict[str, Any] = {}
        for name in profile.names():
            self.instances[name] = self._build(name, registry, handle)
        check_plugin_config(profile.plugin_config, registry, "")
        for name in profile.plugin_config:
            if name not in self.instances:
                log.info("pluginConfig for %s, which the profile does not enable: ignored", name)
        self.points: dict[str, list[Enabled]] = {p: self._expand(p) for p in EXTENSION_POINTS}
        self.total_score_weight = sum(e.weight for e in self.points["score"])

    def _build(self, name: str, registry: Registry, handle: Handle) -> Any:
        plugin = build_plugin(registry, name, self.profile.plugin_config.get(name), handle, "")
        if not any(_implements(plugin, p) for p in EXTENSION_POINTS):
            entry = registry.get(name)
            source = entry.source if entry is not None else "?"
            raise PluginError(name, f"({source}) implements no extension point")
        return plugin

    def _expand(self, point: str) -> list[Enabled]:
        """multiPoint entries for the points the plugin implements, unless the point disables or
        re-lists them; then the point's own entries (which must be implemented)."""
        own = self.profile.point(point)
        multi = self.profile.point(MULTI_POINT)
        refuse_duplicates(own.names(), point, f"profile {self.profile.scheduler_name}")
        refuse_duplicates(multi.names(), MULTI_POINT, f"profile {self.profile.scheduler_name}")
        own_names = {r.name for r in own.enabled}
        out: list[Enabled] = []
        for ref in multi.enabled:
            plugin = self.instances[ref.name]
            if _implements(plugin, point) and not own.disables(ref.name) and ref.name not in own_names:
                out.append(Enabled(plugin, _weight(ref)))
        multi_weights = {r.name: r.weight for r in multi.enabled}
        for ref in own.enabled:
            plugin = self.instances[ref.name]
            if not _implements(plugin, point):
                raise PluginError(
                    ref.name, f"enabled at {point} but has no {'/'.join(EXTENSION_POINTS[point])}"
                )
            weight = ref.weight or multi_weights.get(ref.name, 0)
            out.append(Enabled(plugin, _weight(PluginRef(ref.name, weight))))
        return out

    # ---- extension points ---------------------------------------------------------------------

    def _time(self, plugin: str, point: str, start: float) -> None:
        if self._timer is not None:
            self._timer(plugin, point, time.perf_counter() - start)

    def run_pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        """PreFilter plugins in order; the first rejection is the pod's (every node fails with it)."""
        skip: set[str] = set()
        state.write(_SKIP_FILTER, skip)
        for e in self.points["preFilter"]:
            start = time.perf_counter()
            st = _call(e.name, "preFilter", e.plugin.pre_filter, state, pod)
            self._time(e.name, "preFilter", start)
            if st is None or st.code is Code.SUCCESS:
                continue
            if st.code is Code.SKIP:
                skip.add(e.name)
                continue
            return Status(st.code, st.reasons, e.name)
        return None

    def run_filter(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> FilterOutcome:
        out = FilterOutcome()
        skip: set[str] = state.get(_SKIP_FILTER) or set()
        feasible = list(nodes)
        for e in self.points["filter"]:
            if e.name in skip or not feasible:
                continue
            start = time.perf_counter()
            batch = getattr(e.plugin, "filter_nodes", None)
            still: list[NodeInfo] = []
            ni = None
            pairs: Iterable[tuple[NodeInfo, Any]]
            try:
                if batch is not None:
                    answers = list(batch(state, pod, feasible))
                    if len(answers) != len(feasible):
                        raise PluginFailure(
                            e.name, "filter", f"filter_nodes answered {len(answers)} of {len(feasible)} nodes"
                        )
                    pairs = zip(feasible, answers, strict=True)
                else:
                    fn = e.plugin.filter
                    pairs = ((n, fn(state, pod, n)) for n in feasible)
                for ni, st in pairs:
                    if st is None or (isinstance(st, Status) and st.code is Code.SUCCESS):
                        still.append(ni)
                    else:
                        _reject(out, e.name, ni.name, st)
            except PluginFailure:
                raise
            except Exception as err:
                where = f"node {ni.name}: " if ni is not None and batch is None else ""
                raise PluginFailure(e.name, "filter", f"{where}{err!r}") from err
            self._time(e.name, "filter", start)
            feasible = still
        out.passed = [ni.name for ni in feasible]
        return out

    def run_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> dict[str, int]:
        """PreScore, Score and NormalizeScore; the combined 0..10 per node (:func:`combine_scores`)."""
        return self._combined(nodes, self._scores(state, pod, nodes))

    def _scores(
        self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]
    ) -> list[tuple[Enabled, list[int]]]:
        """PreScore (a SKIP skips that plugin's score), then every Score plugin's normalised scores."""
        skip: set[str] = set()
        for e in self.points["preScore"]:
            start = time.perf_counter()
            st = _call(e.name, "preScore", e.plugin.pre_score, state, pod, nodes)
            self._time(e.name, "preScore", start)
            if st is not None and st.code is Code.SKIP:
                skip.add(e.name)
            elif st is not None and st.code is not Code.SUCCESS:
                raise PluginFailure(e.name, "preScore", st.message or st.code.name)
        return self._plugin_scores(state, pod, nodes, skip)

    def _combined(self, nodes: Sequence[NodeInfo], scores: list[tuple[Enabled, list[int]]]) -> dict[str, int]:
        weighted = [(e.weight, values) for e, values in scores]
        combined = combine_scores(weighted, len(nodes), self.total_score_weight)
        return dict(zip([ni.name for ni in nodes], combined, strict=True))

    def _plugin_scores(
        self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo], skip: set[str]
    ) -> list[tuple[Enabled, list[int]]]:
        """Each Score plugin not skipped, with its scores after NormalizeScore, in node order."""
        out: list[tuple[Enabled, list[int]]] = []
        for e in self.points["score"]:
            if e.name in skip:
                continue
            start = time.perf_counter()
            values = self._score_one(e, state, pod, nodes)
            self._time(e.name, "score", start)
            if values and (min(values) < MIN_NODE_SCORE or max(values) > MAX_NODE_SCORE):
                node, bad = next(
                    (ni.name, v)
                    for ni, v in zip(nodes, values, strict=True)
                    if not MIN_NODE_SCORE <= v <= MAX_NODE_SCORE
                )
                raise PluginFailure(e.name, "score", f"node {node}: score {bad} outside 0..{MAX_NODE_SCORE}")
            out.append((e, values))
        return out

    def _score_one(self, e: Enabled, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> list[int]:
        """One plugin's scores, in node order, after its NormalizeScore."""
        batch = getattr(e.plugin, "score_nodes", None)
        name = ""
        try:
            if batch is not None:
                values = [int(v) for v in batch(state, pod, nodes)]
                if len(values) != len(nodes):
                    raise ValueError(f"score_nodes answered {len(values)} of {len(nodes)} nodes")
            else:
                fn = e.plugin.score
                values = []
                for ni in nodes:
                    name = ni.name
                    values.append(int(fn(state, pod, ni)))
        except Exception as err:
            where = f"node {name}: " if name else ""
            raise PluginFailure(e.name, "score", f"{where}{err!r}") from err
        normalize = getattr(e.plugin, "normalize_score", None)
        if normalize is None:
            return values
        scores = dict(zip([ni.name for ni in nodes], values, strict=True))
        st = _call(e.name, "normalizeScore", normalize, state, pod, scores)
        if st is not None and st.code is not Code.SUCCESS:
            raise PluginFailure(e.name, "normalizeScore", st.message or st.code.name)
        return [int(scores[ni.name]) for ni in nodes]

    def run_reserve(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        """Reserve plugins in order; on the first failure every reserve plugin is unreserved."""
        for e in self.points["reserve"]:
            try:
                st = _call(e.name, "reserve", e.plugin.reserve, state, pod, node_name)
            except PluginFailure as err:
                st = Status(Code.ERROR, (str(err),))
            if st is not None and st.code is not Code.SUCCESS:
                self.run_unreserve(state, pod, node_name)
                return Status(st.code, st.reasons, e.name)
        return None

    def run_unreserve(self, state: CycleState, pod: Obj, node_name: str) -> None:
        """Unreserve in reverse order; a failing plugin is logged, the others still run."""
        for e in reversed(self.points["reserve"]):
            try:
                e.plugin.unreserve(state, pod, node_name)
            except Exception:
                log.exception("plugin %s: unreserve on %s failed", e.name, node_name)

    def explain(self, pod: Obj, nodes: Sequence[NodeInfo], names: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Why the cycle would (not) pick each node of ``names`` for ``pod``, computed by the cycle's own
        code over ``nodes`` (the candidates a cycle would see): PreFilter (a SKIP skips that plugin's
        filter), every Filter plugin's verdict on the node, then PreScore, Score and NormalizeScore over
        the nodes that pass, so the per-plugin scores are the normalised ones and ``extenderScore`` is
        what ``/prioritize`` answers for that node list. Reserves nothing; a failing plugin is reported
        in ``error``."""
        state = CycleState()
        out: dict[str, dict[str, Any]] = {n: {"filter": [], "scores": {}} for n in names}
        try:
            rejected = self.run_pre_filter(state, pod)
            skip: set[str] = state.get(_SKIP_FILTER) or set()
            by_name = {ni.name: ni for ni in nodes}
            for name in names:
                verdicts = out[name]["filter"]
                info = by_name.get(name) or NodeInfo(name, None)
                for e in self.points["filter"]:
                    if rejected is not None:
                        why = f"PreFilter {rejected.plugin}: {rejected.message or rejected.code.name}"
                        verdicts.append({"plugin": e.name, "filter": why})
                    elif e.name in skip:
                        verdicts.append({"plugin": e.name, "filter": "skipped (PreFilter)"})
                    else:
                        st = _call(e.name, "filter", e.plugin.filter, state, pod, info)
                        verdicts.append({"plugin": e.name, "filter": _verdict(st)})
            feasible = [] if rejected is not None else self.run_filter(state, pod, nodes).passed
            passing = [by_name[n] for n in feasible]
            for name in feasible:
                if name in out:
                    out[name]["passes"] = True
            if passing:
                per_plugin = self._scores(state, pod, passing)
                combined = self._combined(passing, per_plugin)
                index = {ni.name: i for i, ni in enumerate(passing)}
                for name in names:
                    i = index.get(name)
                    if i is not None:
                        out[name]["scores"] = {e.name: values[i] for e, values in per_plugin}
                        out[name]["extenderScore"] = combined[name]
        except PluginFailure as err:
            for doc in out.values():
                doc["error"] = str(err)
        for name, doc in out.items():
            doc["passes"] = "error" not in doc and doc.get("passes", False)
            doc["plugins"] = self.debug_node(name)
        return out

    def debug_node(self, node_name: str) -> dict[str, Any]:
        """What each :class:`NodeDebugPlugin` has cached about the node, by plugin name."""
        return {
            name: plugin.debug_node(node_name)
            for name, plugin in self.instances.items()
            if isinstance(plugin, NodeDebugPlugin)
        }


def _verdict(st: Status | None) -> str:
    if st is None or st.code is Code.SUCCESS:
        return "pass"
    return st.message or st.code.name


def _reject(out: FilterOutcome, plugin: str, node: str, st: Any) -> None:
    if not isinstance(st, Status):
        raise PluginFailure(plugin, "filter", f"node {node}: returned {st!r}, want a Status or None")
    if st.code is Code.ERROR:
        raise PluginFailure(plugin, "filter", f"node {node}: {st.message or 'error'}")
    if st.code is Code.SKIP:
        raise PluginFailure(plugin, "filter", f"node {node}: Skip is not a filter answer")
    target = out.unresolvable if st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE else out.failed
    target[node] = st.message or f"rejected by {plugin}"
    out.rejected_by[plugin] = out.rejected_by.get(plugin, 0) + 1


def _call(plugin: str, point: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        st = fn(*args)
    except PluginFailure:
        raise
    except Exception as err:
        raise PluginFailure(plugin, point, repr(err)) from err
    if st is not None and not isinstance(st, Status):
        raise PluginFailure(plugin, point, f"returned {st!r}, want a Status or None")
    if st is not None and st.code is Code.ERROR:
        raise PluginFailure(plugin, point, st.message or "error")
    return st


def _implements(plugin: Any, point: str) -> bool:
    return all(callable(getattr(plugin, m, None)) for m in EXTENSION_POINTS[point])


def _weight(ref: PluginRef) -> int:
    return ref.weight if ref.weight > 0 else 1
