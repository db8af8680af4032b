"""The framework runtime (kube-scheduler's ``frameworkImpl``): one profile's plugins, built once from the
registry, and every extension point run over them as :class:`Framework` methods.

Points get their plugins in kube-scheduler's ``NewFramework`` order (a point's own entries, multiPoint
entries expanded to every point the plugin implements). A plugin that raises, or answers ``ERROR``, fails
the call with :class:`PluginFailure`. Filter over many nodes (:meth:`Framework.find_feasible`, the hot
path) runs batch plugins as vector operations first, then the node-by-node ones over the survivors; Score
weights and sums each plugin's normalized scores. Each point's duration is recorded for kube-scheduler's
``scheduler_framework_extension_point_duration_seconds`` (:func:`extension_point`).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np

from koord.scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint
from koord.scheduler.framework.extension import (
    Extensions,
    ReservationHooks,
    ReservationHooksUser,
    ReservationPreBindPlugin,
)
from koord.scheduler.framework.filterresult import FilterResult
from koord.scheduler.framework.interface import (
    EXTENSION_POINTS,
    MAX_NODE_SCORE,
    MAX_PERMIT_WAIT,
    MIN_NODE_SCORE,
    SKIP,
    Code,
    CodedVerdicts,
    CycleState,
    Handle,
    NodeDebugPlugin,
    Status,
)
from koord.scheduler.framework.nominator import Nominator
from koord.scheduler.framework.profile import MULTI_POINT, Enabled, Profile
from koord.scheduler.framework.reservation import ASSUMED_RESERVATION, ReservationInfo, is_reserve_pod
from koord.scheduler.framework.snapshot import NodeSet
from koord.scheduler.framework.types import NodeInfo, Obj, PodInfo, PostFilterResult, PreFilterResult
from koordshared.apis.core.pod import pod_key
from koordshared.runtime.errors import ConfigError, PluginError
from koordshared.runtime.pluginregistry import Registry
from koordshared.runtime.pluginset import build_plugin, check_plugin_config, refuse_duplicates

log = logging.getLogger(__name__)
NARROWED_BY = "framework/preFilterNarrowedBy"
"""CycleState key: the PreFilter plugins whose node lists narrowed this cycle's search, in order."""


def go_list(names: Sequence[str]) -> str:
    """``names`` sorted as kube-scheduler prints a ``sets.List`` with ``%v``: ``[A B]``."""
    return f"[{' '.join(sorted(names))}]"


Timer = Callable[[str, str, float], None]
"""``(plugin, extension point, seconds)`` after each plugin call (or pass over the nodes of a call)."""

# Points whose rejecting plugins decide when a pod is retried: their plugins register cluster events.
REQUEUE_POINTS = ("preEnqueue", "preFilter", "filter", "reserve", "permit")
ANY_EVENT = (ClusterEventWithHint(ClusterEvent("*", Action.ALL, "*")),)


class PluginFailure(Exception):
    """A plugin raised or answered ``ERROR``: the current call fails (and only it)."""

    def __init__(self, plugin: str, point: str, message: str) -> None:
        super().__init__(f"plugin {plugin} failed at {point}: {message}")
        self.plugin = plugin
        self.point = point
        self.detail = message


def implements(plugin: Any, point: str) -> bool:
    return all(callable(getattr(plugin, m, None)) for m in EXTENSION_POINTS[point])


def call_status(plugin: str, point: str, fn: Callable[..., Any], *args: Any) -> Status | None:
    """:func:`call` of a method that answers a Status or ``None`` (anything else fails the call)."""
    st = call(plugin, point, fn, *args)
    if st is not None and not isinstance(st, Status):
        raise PluginFailure(plugin, point, f"returned {st!r}, want a Status or None")
    return st


def call(plugin: str, point: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` with an exception or an ``ERROR`` status turned into :class:`PluginFailure`."""
    try:
        st = fn(*args)
    except PluginFailure:
        raise
    except Exception as err:
        raise PluginFailure(plugin, point, repr(err)) from err
    if isinstance(st, Status) and st.code is Code.ERROR:
        raise PluginFailure(plugin, point, st.message or "error")
    return st


def _check(plugin: str, node: str, st: Any) -> Status:
    if not isinstance(st, Status):
        raise PluginFailure(plugin, "filter", f"node {node}: returned {st!r}, want a Status or None")
    if st.code is Code.ERROR:
        raise PluginFailure(plugin, "filter", f"node {node}: {st.message or 'error'}")
    if st.code is Code.SKIP:
        raise PluginFailure(plugin, "filter", f"node {node}: Skip is not a filter answer")
    return st


# ---- extension-point timing --------------------------------------------------------------------------------

P = ParamSpec("P")
R = TypeVar("R")
PointTimer = Callable[[str, str, str, float], None]
"""``(profile, extension point, status, seconds)``."""

# kube-scheduler's Code.String() values.
CODE_NAMES = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


def kube_point(point: str) -> str:
    """The ``extension_point`` label kube-scheduler gives a point named here in camelCase
    (``preFilter`` -> ``PreFilter``; NormalizeScore is its ``ScoreExtensionNormalize``)."""
    if point == "normalizeScore":
        return "ScoreExtensionNormalize"
    return point[:1].upper() + point[1:]


def _code(out: Any) -> str:
    if isinstance(out, Status):
        return CODE_NAMES[out.code]
    if isinstance(out, tuple):
        for item in out:
            if isinstance(item, Status):
                return CODE_NAMES[item.code]
    return CODE_NAMES[Code.SUCCESS]


def extension_point(
    point: str,
) -> Callable[[Callable[Concatenate[Framework, P], R]], Callable[Concatenate[Framework, P], R]]:
    """Time a :class:`Framework` run method as ``point``; the status is the Status it answers (an
    exception counts as ``Error``)."""

    def wrap(fn: Callable[Concatenate[Framework, P], R]) -> Callable[Concatenate[Framework, P], R]:
        def run(fw: Framework, /, *args: P.args, **kwargs: P.kwargs) -> R:
            timer = fw.point_timer
            if timer is None:
                return fn(fw, *args, **kwargs)
            start = time.perf_counter()
            code = CODE_NAMES[Code.ERROR]
            try:
                out = fn(fw, *args, **kwargs)
                code = _code(out)
                return out
            finally:
                timer(fw.profile.scheduler_name, point, code, time.perf_counter() - start)

        functools.update_wrapper(run, fn)
        return run

    return wrap


def _sorts_only_when_named(plugin: Any) -> bool:
    """A plugin whose ``less`` multiPoint does not enable (``queue_sort_when_named = True``): it sorts the
    queue only when the profile names it at queueSort, so a profile enabling it at multiPoint keeps
    PrioritySort (Coscheduling: Koordinator up to v1.6 sorted by it, since v1.7 it does not)."""
    return bool(getattr(plugin, "queue_sort_when_named", False))


class Framework:
    """One profile's plugins, built once at start; the run methods are safe to call from several threads as
    long as the plugins are. ``points`` limits the extension points (default: those the profile was parsed
    for; the extender front end serves a subset); ``complete`` requires a QueueSort and a Bind plugin, as a
    scheduler profile must have."""

    def __init__(
        self,
        profile: Profile,
        registry: Registry,
        handle: Handle,
        *,
        timer: Timer | None = None,
        point_timer: PointTimer | None = None,
        points: Sequence[str] | None = None,
        complete: bool = False,
    ) -> None:
        self.profile = profile
        self.handle = handle
        self._timer = timer
        self.point_timer = point_timer
        """Records each extension point's run (koord-scheduler's metrics; none in the extender)."""
        self.nominator: Nominator | None = None
        """The pods nominated to nodes (set by the scheduler; the extender front end has none)."""
        # The points the profile was parsed for (a front end's subset), unless given.
        self.point_names = tuple(
            points or [p for p in EXTENSION_POINTS if p in profile.plugins] or EXTENSION_POINTS
        )
        where = f"profile {profile.scheduler_name}"
        check_plugin_config(profile.plugin_config, registry, "")
        self.instances: dict[str, Any] = {}
        for name in profile.names():
            plugin = build_plugin(registry, name, profile.plugin_config.get(name), handle, "")
            if not any(implements(plugin, p) for p in self.point_names):
                entry = registry.get(name)
                source = entry.source if entry is not None else "?"
                raise PluginError(name, f"({source}) implements no extension point")
            self.instances[name] = plugin
        for name in profile.plugin_config:
            if name not in self.instances:
                log.info("%s: pluginConfig for %s, which the profile does not enable: ignored", where, name)
        self.points: dict[str, list[Enabled]] = {p: self._expand(p, where) for p in self.point_names}
        self.total_score_weight = sum(e.weight for e in self.points.get("score", ()))
        self.extensions = Extensions(list(self.instances.values()))
        self.reservation_hooks = ReservationHooks(list(self.instances.values()))
        for plugin in self.instances.values():
            if isinstance(plugin, ReservationHooksUser):
                plugin.use_reservation_hooks(self.reservation_hooks)
        if complete:
            sorts = len(self.points.get("queueSort", ()))
            if sorts != 1:
                many = (
                    "only one queueSort plugin can be enabled" if sorts else "no queueSort plugin is enabled"
                )
                raise ConfigError(f"{where}: {many}")
            if not self.points.get("bind"):
                raise ConfigError(f"{where}: at least one bind plugin is needed")

    def _expand(self, point: str, where: str) -> list[Enabled]:
        """kube-scheduler's order: multiPoint plugins re-listed at the point (in the point's order),
        then the other multiPoint plugins, then the point's other entries."""
        own = self.profile.point(point)
        multi = self.profile.point(MULTI_POINT)
        refuse_duplicates(own.names(), point, where)
        refuse_duplicates(multi.names(), MULTI_POINT, where)
        own_names = set(own.names())
        multi_weights = {r.name: r.weight for r in multi.enabled}
        for ref in own.enabled:
            if not implements(self.instances[ref.name], point):
                raise PluginError(
                    ref.name, f"enabled at {point} but has no {'/'.join(EXTENSION_POINTS[point])}"
                )
        # A plugin the point disables is not a multiPoint override even when the point lists it again
        # (Koordinator's ``bind: {disabled: ["*"], enabled: [Reservation, DefaultBinder]}``): it keeps
        # its place among the point's entries, as kube-scheduler's expandMultiPointPlugins keeps it.
        overrides = [r for r in own.enabled if r.name in multi_weights and not own.disables(r.name)]
        from_multi = (
            []
            if "*" in own.disabled
            else [
                r
                for r in multi.enabled
                if implements(self.instances[r.name], point)
                and not (point == "queueSort" and _sorts_only_when_named(self.instances[r.name]))
                and not own.disables(r.name)
                and r.name not in own_names
            ]
        )
        overridden = {r.name for r in overrides}
        rest = [r for r in own.enabled if r.name not in overridden]
        own_weights = {r.name: r.weight for r in own.enabled}
        out = []
        for ref in (*overrides, *from_multi, *rest):
            weight = 0
            if point == "score":
                weight = own_weights[ref.name] if ref.name in own_weights else multi_weights.get(ref.name, 0)
            out.append(Enabled(self.instances[ref.name], weight or 1))
        return out

    # ---- small points --------------------------------------------------------------------------------------

    def timed(self, state: CycleState, plugin: str, point: str, start: float) -> None:
        if self._timer is not None and state.record_plugin_metrics:
            self._timer(plugin, point, time.perf_counter() - start)

    def has(self, point: str) -> bool:
        return bool(self.points.get(point))

    def less(self, a: Any, b: Any) -> bool:
        (e,) = self.points["queueSort"]
        return bool(e.plugin.less(a, b))

    def run_pre_enqueue(self, pod: Obj) -> Status | None:
        """The first PreEnqueue plugin that gates the pod (``None``: it may enter the active queue)."""
        for e in self.points.get("preEnqueue", ()):
            st = call_status(e.name, "preEnqueue", e.plugin.pre_enqueue, pod)
            if st is not None and not st.is_success:
                return st.with_plugin(e.name)
        return None

    @extension_point("PreFilter")
    def run_pre_filter(self, state: CycleState, pod: Obj) -> tuple[PreFilterResult | None, Status | None]:
        """PreFilter plugins in order: the intersection of their node subsets, and the first rejection
        (every node fails with it); a SKIP takes that plugin's filter out (``state.skip_filter``)."""
        result: PreFilterResult | None = None
        narrowed: list[str] = []
        state.skip_filter = set()
        for e in self.points.get("preFilter", ()):
            start = time.perf_counter()
            answer = call(e.name, "preFilter", e.plugin.pre_filter, state, pod)
            self.timed(state, e.name, "preFilter", start)
            if isinstance(answer, PreFilterResult):
                if answer.node_names is not None:
                    narrowed.append(e.name)
                result = answer if result is None else result.merge(answer)
            elif isinstance(answer, Status):
                if answer.code is Code.SKIP:
                    state.skip_filter.add(e.name)
                elif not answer.is_success:
                    return None, answer.with_plugin(e.name)
            elif answer is not None:
                raise PluginFailure(e.name, "preFilter", f"returned {answer!r}")
        state.write(NARROWED_BY, tuple(narrowed))
        if result is not None and result.node_names is not None and not result.node_names:
            why = f"node(s) didn't satisfy plugin(s) {go_list(narrowed)} simultaneously"
            return result, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (why,), narrowed[0])
        return result, None

    @extension_point("PostFilter")
    def run_post_filter(
        self, state: CycleState, pod: Obj, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        """PostFilter plugins in order until one succeeds or says unresolvable; otherwise the reasons of
        all, with the last result that says something of the nomination (``PostFilterResult("")``
        clears it, ``None`` leaves it)."""
        reasons: list[str] = []
        rejector = ""
        kept: PostFilterResult | None = None
        for e in self.points.get("postFilter", ()):
            start = time.perf_counter()
            result, st = call(e.name, "postFilter", e.plugin.post_filter, state, pod, statuses)
            self.timed(state, e.name, "postFilter", start)
            if st is None or st.is_success:
                return result, Status(Code.SUCCESS, (), e.name)
            if st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return result, st.with_plugin(e.name)
            if result is not None:
                kept = result
            reasons.extend(st.reasons)
            rejector = rejector or e.name
        return kept, Status(Code.UNSCHEDULABLE, tuple(reasons), rejector)

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: Obj, to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        """Each PreFilter plugin with ``add_pod`` (not skipped) updates its state for ``to_add`` now
        counted on ``node_info`` (a what-if copy); the first failure is returned as an error."""
        return self._pre_filter_extension("add_pod", state, pod, to_add, node_info)

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: Obj, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        """The same for ``to_remove`` taken off ``node_info`` (preemption's what-if)."""
        return self._pre_filter_extension("remove_pod", state, pod, to_remove, node_info)

    def _pre_filter_extension(
        self, method: str, state: CycleState, pod: Obj, other: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        for e in self.points.get("preFilter", ()):
            fn = getattr(e.plugin, method, None)
            if fn is None or e.name in state.skip_filter:
                continue
            try:
                st = call_status(e.name, "preFilter", fn, state, pod, other, node_info)
            except PluginFailure as err:
                return Status(Code.ERROR, (str(err),), e.name)
            if st is not None and not st.is_success:
                return Status(Code.ERROR, (f"{method} of {e.name}: {st.message or st.code.name}",), e.name)
        return None

    @extension_point("Reserve")
    def run_reserve(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        """Reserve plugins in order; on the first failure every reserve plugin is unreserved."""
        for e in self.points.get("reserve", ()):
            try:
                st = call_status(e.name, "reserve", e.plugin.reserve, state, pod, node_name)
            except PluginFailure as err:
                st = Status(Code.ERROR, (str(err),))
            if st is not None and not st.is_success:
                self.run_unreserve(state, pod, node_name)
                return st.with_plugin(e.name)
        return None

    @extension_point("Unreserve")
    def run_unreserve(self, state: CycleState, pod: Obj, node_name: str) -> None:
        """Unreserve in reverse order; a failing plugin is logged, the others still run."""
        for e in reversed(self.points.get("reserve", ())):
            try:
                e.plugin.unreserve(state, pod, node_name)
            except Exception:
                log.exception("plugin %s: unreserve on %s failed", e.name, node_name)

    # ---- Filter over many nodes ----------------------------------------------------------------------------

    def find_feasible(
        self, state: CycleState, pod: Obj, nodes: NodeSet, want: int | None = None
    ) -> FilterResult:
        """The first ``want`` feasible nodes of ``nodes`` in order (all when ``want`` is None), as
        kube-scheduler's ``findNodesThatPassFilters`` finds them: batch plugins (``filter_nodes``) first, as
        vector operations over the nodes still feasible, then the node-by-node plugins over the survivors
        in search order. Why each node failed is worked out only when asked (:class:`FilterResult`); a
        node with pods nominated ahead of this one is filtered by :meth:`filter_with_nominated_pods`."""
        plugins = [e for e in self.points.get("filter", ()) if e.name not in state.skip_filter]
        n = len(nodes)
        alive = np.ones(n, dtype=bool)
        result = FilterResult(nodes, nodes, n, state, pod, plugins)
        # Nodes with nominated pods ahead of this one are filtered node by node, twice (rare: preemption).
        ahead = self.nominated_ahead(state, pod)
        if self.extensions.filter:
            # BeforeFilter may change what a node holds for this pod: such nodes are judged one by one on the
            # transformed NodeInfo (the snapshot's arrays do not know it); the others as usual.
            changed: dict[int, tuple[Obj, NodeInfo]] = {}
            for pos, ni in enumerate(nodes):
                p2, ni2, did = self.extensions.before_filter(state, pod, ni)
                if did:
                    changed[pos] = (p2, ni2)
            if changed:
                return self._with_transformed(state, pod, nodes, want, plugins, changed, ahead)
        nominated = _positions(nodes, ahead) if ahead else None
        if nominated is not None:
            alive &= ~nominated
        per_node: list[tuple[int, Enabled]] = []
        for pi, e in enumerate(plugins):
            batch = getattr(e.plugin, "filter_nodes", None)
            if batch is None:
                per_node.append((pi, e))
                continue
            cand = np.nonzero(alive)[0]
            if not len(cand):
                break
            sub = nodes if len(cand) == n else nodes.subset(alive)
            start = time.perf_counter()
            try:
                answer = batch(state, pod, sub)
            except PluginFailure:
                raise
            except Exception as err:
                raise PluginFailure(e.name, "filter", repr(err)) from err
            self.timed(state, e.name, "filter", start)
            if isinstance(answer, np.ndarray):
                if answer.shape != (len(cand),):
                    raise PluginFailure(e.name, "filter", f"answered {answer.shape} for {len(cand)} nodes")
                rejected = cand[~answer]
                if len(rejected):
                    result.rejected.append((pi, rejected))
                    alive[rejected] = False
                continue
            if isinstance(answer, CodedVerdicts):
                _coded(result, pi, e.name, answer, sub, cand, alive)
                continue
            answers = answer if isinstance(answer, list) else list(answer)
            if len(answers) != len(cand):
                raise PluginFailure(
                    e.name, "filter", f"filter_nodes answered {len(answers)} of {len(cand)} nodes"
                )
            # Thousands of answers, a handful of distinct Status objects: each distinct one is checked once,
            # and the nodes it rejects are found with array operations.
            ids = np.fromiter(map(id, answers), dtype=np.intp, count=len(answers))
            _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
            inverse = inverse.reshape(-1)
            said: list[Status | None] = []
            for at in first.tolist():
                st = answers[at]
                ok = st is None or (isinstance(st, Status) and st.code is Code.SUCCESS)
                said.append(None if ok else _check(e.name, sub.info(at).name, st))
            if len(first) <= FEW_STATUSES:
                for k, checked in enumerate(said):
                    if checked is not None:
                        positions = cand[inverse == k]
                        result.grouped.append((pi, checked, positions))
                        alive[positions] = False
                continue
            # Many distinct statuses (a plugin that words each node's reason): node by node, at C level.
            per_node_verdicts = list(map(said.__getitem__, inverse.tolist()))
            failing = [k for k, v in enumerate(per_node_verdicts) if v is not None]
            positions_list = cand[failing].tolist()
            result.failed.update(
                zip(positions_list, [(pi, per_node_verdicts[k]) for k in failing], strict=True)
            )
            alive[positions_list] = False
        index = {e.name: pi for pi, e in enumerate(plugins)}
        special = set() if nominated is None else set(np.nonzero(nominated)[0].tolist())
        if not per_node:
            for pos in special:  # a few nodes: settle them here and keep the vector path
                ni = nodes.info(pos)
                st = self.filter_with_nominated_pods(state, pod, ni, ahead[ni.name])
                if st is None:
                    alive[pos] = True
                else:
                    result.failed[pos] = (index[st.plugin], st)
            survivors = np.nonzero(alive)[0]
            taken = survivors if want is None else survivors[:want]
            result.feasible = nodes.subset(_mask(n, taken))
            if want is not None and len(taken) == want:
                result.processed = int(taken[-1]) + 1
            return result
        survivors = np.nonzero(alive)[0]
        if special:
            survivors = np.union1d(survivors, np.asarray(sorted(special), dtype=np.int64))
        infos = nodes.infos
        keep: list[int] = []
        for pos in survivors.tolist():
            ni = infos[pos]
            if pos in special:
                st = self.filter_with_nominated_pods(state, pod, ni, ahead[ni.name])
                verdict = None if st is None else (index[st.plugin], st)
            else:
                verdict = _first_rejection(per_node, state, pod, ni)
            if verdict is not None:
                result.failed[pos] = verdict
                continue
            keep.append(pos)
            if want is not None and len(keep) >= want:
                result.processed = pos + 1
                break
        result.feasible = nodes.subset(_mask(n, np.asarray(keep, dtype=np.int64)))
        return result

    def _with_transformed(
        self,
        state: CycleState,
        pod: Obj,
        nodes: NodeSet,
        want: int | None,
        plugins: list[Enabled],
        changed: dict[int, tuple[Obj, NodeInfo]],
        ahead: Mapping[str, list[PodInfo]],
    ) -> FilterResult:
        """Every node node by node (plugins in order), the transformed ones with their transformed pod and
        NodeInfo, those with nominated pods ahead twice; stops once ``want`` nodes passed."""
        result = FilterResult(nodes, nodes, len(nodes), state, pod, plugins)
        index = {e.name: pi for pi, e in enumerate(plugins)}
        every = list(enumerate(plugins))
        keep: list[int] = []
        for pos, ni in enumerate(nodes):
            p, info = changed.get(pos, (pod, ni))
            if info.name in ahead:
                st = self.filter_with_nominated_pods(state, p, info, ahead[info.name])
                rejected = None if st is None else (index[st.plugin], st)
            else:
                rejected = _first_rejection(every, state, p, info)
            if rejected is not None:
                result.failed[pos] = rejected
                continue
            keep.append(pos)
            if want is not None and len(keep) >= want:
                result.processed = pos + 1
                break
        result.feasible = nodes.subset(_mask(len(nodes), np.asarray(keep, dtype=np.int64)))
        return result

    def nominated_ahead(self, state: CycleState, pod: Obj) -> Mapping[str, list[PodInfo]]:
        """Node -> the pods nominated there of ``pod``'s priority or higher (empty without nominations)."""
        nominator = self.nominator
        if nominator is None or not len(nominator):
            return {}
        return nominator.for_pod(state.pod_info if state.pod_info is not None else PodInfo(pod))

    def filter_with_nominated_pods(
        self, state: CycleState, pod: Obj, node: NodeInfo, ahead: Sequence[PodInfo]
    ) -> Status | None:
        """kube-scheduler's ``RunFilterPluginsWithNominatedPods``: with pods nominated to the node ahead of
        this one (``ahead``), the filters run first with them counted on the node (this pod must not take
        the room freed for them), then, if that passes, without them (they may land elsewhere, and some
        filters, such as pod affinity, pass only with them gone). The node fits when both pass."""
        if ahead:
            with_state, with_node = state.clone(), node.clone()
            added = False
            for pi in ahead:
                if pi.uid in with_node.pods:
                    continue
                with_node.add_pod(pi)
                added = True
                st = self.run_pre_filter_extension_add_pod(with_state, pod, pi, with_node)
                if st is not None:
                    raise PluginFailure(st.plugin, "preFilter", st.message)
            if added:
                st = self.run_filter_plugins(with_state, pod, with_node)
                if st is not None:
                    return st
        return self.run_filter_plugins(state, pod, node)

    def filter_one(self, state: CycleState, pod: Obj, node: NodeInfo) -> Status | None:
        """Every Filter plugin (not skipped) on one node as the cycle runs them (with the pods nominated
        there, see :meth:`filter_with_nominated_pods`): the first rejection, or ``None``."""
        nominator = self.nominator
        ahead: Sequence[PodInfo] = ()
        if nominator is not None and len(nominator):
            ahead = nominator.ahead_on(
                state.pod_info if state.pod_info is not None else PodInfo(pod), node.name
            )
        return self.filter_with_nominated_pods(state, pod, node, ahead)

    def run_filter_plugins(self, state: CycleState, pod: Obj, node: NodeInfo) -> Status | None:
        """Every Filter plugin (not skipped) on one node as it is, node by node: the first rejection."""
        for e in self.points.get("filter", ()):
            if e.name in state.skip_filter:
                continue
            st = call(e.name, "filter", e.plugin.filter, state, pod, node)
            if st is not None and not (isinstance(st, Status) and st.code is Code.SUCCESS):
                return _check(e.name, node.name, st).with_plugin(e.name)
        return None

    # ---- Score ---------------------------------------------------------------------------------------------

    @extension_point("PreScore")
    def run_pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> None:
        """PreScore plugins in order; a SKIP takes that plugin's score out (``state.skip_score``)."""
        state.skip_score = set()
        for e in self.points.get("preScore", ()):
            start = time.perf_counter()
            st = call(e.name, "preScore", e.plugin.pre_score, state, pod, nodes)
            self.timed(state, e.name, "preScore", start)
            if st is not None and st.code is Code.SKIP:
                state.skip_score.add(e.name)
            elif st is not None and not st.is_success:
                raise PluginFailure(e.name, "preScore", st.message or st.code.name)

    @extension_point("Score")
    def plugin_scores(self, state: CycleState, pod: Obj, nodes: NodeSet) -> list[tuple[Enabled, np.ndarray]]:
        """Each Score plugin not skipped, with its scores after NormalizeScore, in node order."""
        out: list[tuple[Enabled, np.ndarray]] = []
        for e in self.points.get("score", ()):
            if e.name in state.skip_score:
                continue
            start = time.perf_counter()
            values = _score_one(e, state, pod, nodes)
            self.timed(state, e.name, "score", start)
            if len(values) and (values.min() < MIN_NODE_SCORE or values.max() > MAX_NODE_SCORE):
                bad = int(np.nonzero((values < MIN_NODE_SCORE) | (values > MAX_NODE_SCORE))[0][0])
                raise PluginFailure(
                    e.name,
                    "score",
                    f"node {nodes[bad].name}: score {values[bad]} outside 0..{MAX_NODE_SCORE}",
                )
            out.append((e, values))
        return out

    # ---- Permit, PreBind, Bind, PostBind -------------------------------------------------------------------

    @extension_point("Permit")
    def run_permit(
        self, state: CycleState, pod: Obj, node_name: str
    ) -> tuple[Status | None, dict[str, float]]:
        """``(None, {})``: allowed; ``(Wait, {plugin: seconds})``: held by those plugins, the Wait status
        giving each one's reason in that order; a rejection."""
        waits: dict[str, float] = {}
        reasons: list[str] = []
        for e in self.points.get("permit", ()):
            start = time.perf_counter()
            answer = call(e.name, "permit", e.plugin.permit, state, pod, node_name)
            self.timed(state, e.name, "permit", start)
            st, timeout = answer if isinstance(answer, tuple) else (answer, 0.0)
            if st is None or st.is_success:
                continue
            if st.code is Code.WAIT:
                if timeout > MAX_PERMIT_WAIT:
                    log.warning(
                        "plugin %s asked pod %s to wait %.0fs at Permit: capped at %.0fs "
                        "(the framework's limit)",
                        e.name,
                        pod_key(pod),
                        timeout,
                        MAX_PERMIT_WAIT,
                    )
                waits[e.name] = min(max(float(timeout), 0.0), MAX_PERMIT_WAIT)
                reasons.append(st.message)
                continue
            return st.with_plugin(e.name), {}
        if waits:
            return Status(Code.WAIT, tuple(reasons), next(iter(waits))), waits
        return None, {}

    @extension_point("PreBind")
    def run_pre_bind(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        """PreBind plugins in order; a reserve pod is no pod: its PreBind is the PreBind plugins'
        ``pre_bind_reservation`` (those that have one, in PreBind order), given the reservation its cycle
        placed, and their ``patch_pod`` changes go onto the Reservation (Koordinator's ``RunPreBindPlugins``
        for a reserve pod)."""
        if not is_reserve_pod(pod):
            return self._each_pre_bind(
                [(e, e.plugin.pre_bind) for e in self.points.get("preBind", ())], state, pod, node_name
            )
        reservation = state.get(ASSUMED_RESERVATION)
        if not isinstance(reservation, ReservationInfo):
            return Status(Code.ERROR, ("no reservation was placed in this reserve pod's cycle",))
        calls = [
            (e, e.plugin.pre_bind_reservation)
            for e in self.points.get("preBind", ())
            if isinstance(e.plugin, ReservationPreBindPlugin)
        ]
        return self._each_pre_bind(calls, state, reservation, node_name)

    def _each_pre_bind(
        self, calls: list[tuple[Enabled, Callable[..., Any]]], state: CycleState, subject: Any, node: str
    ) -> Status | None:
        """The first failure of ``fn(state, subject, node)`` over ``calls``."""
        for e, fn in calls:
            start = time.perf_counter()
            try:
                st = call_status(e.name, "preBind", fn, state, subject, node)
            except PluginFailure as err:
                st = Status(Code.ERROR, (str(err),))
            self.timed(state, e.name, "preBind", start)
            if st is not None and not st.is_success:
                return st.with_plugin(e.name)
        return None

    @extension_point("Bind")
    def run_bind(self, state: CycleState, pod: Obj, node_name: str) -> Status:
        """The first Bind plugin that does not skip; ``SKIP`` when every one skipped."""
        for e in self.points.get("bind", ()):
            start = time.perf_counter()
            try:
                st = call(e.name, "bind", e.plugin.bind, state, pod, node_name)
            except PluginFailure as err:
                st = Status(Code.ERROR, (err.detail,))
            self.timed(state, e.name, "bind", start)
            if st is None or st.code is Code.SUCCESS:
                return Status(Code.SUCCESS, (), e.name)
            if st.code is Code.SKIP:
                continue
            # kube-scheduler's RunBindPlugins wording, which operators see in FailedScheduling Events
            return Status(st.code, (f'running Bind plugin "{e.name}": {st.message}',), e.name)
        return SKIP

    @extension_point("PostBind")
    def run_post_bind(self, state: CycleState, pod: Obj, node_name: str) -> None:
        for e in self.points.get("postBind", ()):
            try:
                e.plugin.post_bind(state, pod, node_name)
            except Exception:
                log.exception("plugin %s: postBind of %s on %s failed", e.name, pod_key(pod), node_name)

    # ---- what the plugins registered and keep --------------------------------------------------------------

    def events_to_register(self) -> dict[str, tuple[ClusterEventWithHint, ...]]:
        """Plugin -> the cluster events that may make a pod it rejected schedulable (a plugin that
        registers none is requeued on any event)."""
        out: dict[str, tuple[ClusterEventWithHint, ...]] = {}
        for point in REQUEUE_POINTS:
            for e in self.points.get(point, ()):
                if e.name in out:
                    continue
                fn = getattr(e.plugin, "events_to_register", None)
                out[e.name] = tuple(fn()) if callable(fn) else ANY_EVENT
        return out

    def debug_node(self, node_name: str) -> dict[str, Any]:
        """What each :class:`NodeDebugPlugin` has cached about the node, by plugin name."""
        return {
            name: plugin.debug_node(node_name)
            for name, plugin in self.instances.items()
            if isinstance(plugin, NodeDebugPlugin)
        }


FEW_STATUSES = 32
"""Up to this many distinct Status objects in a batch answer, the nodes each rejects are kept as one array
(:attr:`FilterResult.grouped`); beyond, node by node."""


def _coded(
    result: FilterResult,
    pi: int,
    plugin: str,
    answer: CodedVerdicts,
    sub: NodeSet,
    cand: np.ndarray,
    alive: np.ndarray,
) -> None:
    """A coded batch answer into ``result``: each failing code's nodes found with one comparison."""
    codes = np.asarray(answer.codes)
    if codes.shape != (len(cand),):
        raise PluginFailure(plugin, "filter", f"answered {codes.shape} codes for {len(cand)} nodes")
    for k, st in enumerate(answer.statuses):
        if st is None or (isinstance(st, Status) and st.code is Code.SUCCESS):
            continue
        at = np.flatnonzero(codes == k)
        if len(at):
            checked = _check(plugin, sub.info(int(at[0])).name, st)
            positions = cand[at]
            result.grouped.append((pi, checked, positions))
            alive[positions] = False


def _first_rejection(
    per_node: list[tuple[int, Enabled]], state: CycleState, pod: Obj, ni: NodeInfo
) -> tuple[int, Status] | None:
    for pi, e in per_node:
        st = call(e.name, "filter", e.plugin.filter, state, pod, ni)
        if st is not None and not (isinstance(st, Status) and st.code is Code.SUCCESS):
            return pi, _check(e.name, ni.name, st)
    return None


def _mask(n: int, positions: np.ndarray) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[positions] = True
    return mask


def _positions(nodes: NodeSet, names: Mapping[str, object]) -> np.ndarray | None:
    """Where the nodes named in ``names`` are in ``nodes`` (``None`` when none of them is)."""
    snapshot, rows = nodes.snapshot, nodes.rows
    if snapshot is not None and rows is not None:
        wanted = [r for name in names if (r := snapshot.index.get(name)) is not None]
        mask = np.isin(rows, np.asarray(wanted, dtype=np.int64))
    else:
        mask = np.fromiter((ni.name in names for ni in nodes), dtype=bool, count=len(nodes))
    return mask if mask.any() else None


def _score_one(e: Enabled, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
    batch = getattr(e.plugin, "score_nodes", None)
    name = ""
    try:
        if batch is not None:
            values = np.asarray(batch(state, pod, nodes), dtype=np.int64)
            if values.shape != (len(nodes),):
                raise ValueError(f"score_nodes answered {values.shape} for {len(nodes)} nodes")
        else:
            fn = e.plugin.score
            raw = []
            for ni in nodes:
                name = ni.name
                raw.append(int(fn(state, pod, ni)))
            values = np.asarray(raw, dtype=np.int64)
    except PluginFailure:
        raise
    except Exception as err:
        where = f"node {name}: " if name else ""
        raise PluginFailure(e.name, "score", f"{where}{err!r}") from err
    vector = getattr(e.plugin, "normalize_scores", None)
    if vector is not None:
        return np.asarray(call(e.name, "normalizeScore", vector, state, pod, values), dtype=np.int64)
    normalize = getattr(e.plugin, "normalize_score", None)
    if normalize is None:
        return values
    scores = dict(zip(nodes.names, values.tolist(), strict=True))
    st = call(e.name, "normalizeScore", normalize, state, pod, scores)
    if st is not None and not st.is_success:
        raise PluginFailure(e.name, "normalizeScore", st.message or st.code.name)
    return np.asarray([int(scores[n]) for n in nodes.names], dtype=np.int64)


def weighted_total(scores: list[tuple[Enabled, np.ndarray]], count: int) -> np.ndarray:
    """``sum of weight * score`` per node (kube-scheduler's total score)."""
    total = np.zeros(count, dtype=np.int64)
    for e, values in scores:
        total += e.weight * values
    return total


def select_host(nodes: NodeSet, totals: np.ndarray, rng: np.random.Generator) -> int:
    """The position of the highest total, ties broken at random (kube-scheduler's ``selectHost``)."""
    if len(totals) == 1:
        return 0
    best = np.flatnonzero(totals == totals.max())
    return int(best[0] if len(best) == 1 else best[rng.integers(len(best))])
