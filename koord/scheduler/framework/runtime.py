"""The framework runtime (kube-scheduler's ``frameworkImpl``): builds one profile's plugins from the
registry and runs the extension points.

Plugins are built once; a plugin enabled at several points is one object. Points get their plugins as
kube-scheduler's ``NewFramework`` orders them: a point's own entries, with multiPoint entries expanded to
every point the plugin implements (a point's entry for the same plugin overrides the multiPoint one and
keeps its place; ``disabled`` at a point removes a multiPoint plugin there). Score weights: the Score
entry's weight, else the multiPoint one, 0 counting as 1. A plugin that raises, or answers ``ERROR``,
fails the call with :class:`PluginFailure`. Filtering and scoring over many nodes live in
:mod:`.cycle`; Permit, PreBind, Bind and PostBind in :mod:`.binding`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koord.runtime.errors import ConfigError, PluginError
from koord.runtime.pluginregistry import Registry
from koord.runtime.pluginset import build_plugin, check_plugin_config, refuse_duplicates
from koord.scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint
from koord.scheduler.framework.extension import Extensions, ReservationHooks, ReservationHooksUser
from koord.scheduler.framework.interface import (
    EXTENSION_POINTS,
    Code,
    CycleState,
    Handle,
    NodeDebugPlugin,
    Status,
)
from koord.scheduler.framework.nominator import Nominator
from koord.scheduler.framework.pointtiming import PointTimer, extension_point
from koord.scheduler.framework.profile import MULTI_POINT, Profile
from koord.scheduler.framework.types import NodeInfo, Obj, PodInfo, PostFilterResult, PreFilterResult

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


@dataclass(frozen=True, slots=True)
class Enabled:
    plugin: Any
    weight: int = 1

    @property
    def name(self) -> str:
        return str(self.plugin.name)


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

    # ---- small points ---------------------------------------------------------------------------

    def timed(self, plugin: str, point: str, start: float) -> None:
        if self._timer is not None:
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
            self.timed(e.name, "preFilter", start)
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
            self.timed(e.name, "postFilter", start)
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
