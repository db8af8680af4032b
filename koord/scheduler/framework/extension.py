"""Koordinator's FrameworkExtender (``pkg/scheduler/frameworkext``): what a plugin may do beyond the
kube-scheduler extension points, declared as optional Protocols and run by the framework when a plugin of the
profile implements them (in profile order; a profile without them pays nothing). Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from koord.scheduler.framework.interface import MAX_NODE_SCORE, Code, CycleState, Plugin, Status
from koord.scheduler.framework.reservation import ReservationInfo
from koord.scheduler.framework.types import NodeInfo, Obj, PreFilterResult

log = logging.getLogger(__name__)


@runtime_checkable
class PreFilterTransformer(Plugin, Protocol):
    def before_pre_filter(self, state: CycleState, pod: Obj) -> tuple[Obj, bool, Status | None]:
        """``(pod, transformed, status)``: the pod this cycle schedules; a status fails the cycle."""

    def after_pre_filter(
        self, state: CycleState, pod: Obj, result: PreFilterResult | None
    ) -> Status | None: ...


@runtime_checkable
class FilterTransformer(Plugin, Protocol):
    def before_filter(
        self, state: CycleState, pod: Obj, node_info: NodeInfo
    ) -> tuple[Obj, NodeInfo, bool]: ...


@runtime_checkable
class ScoreTransformer(Plugin, Protocol):
    def before_score(
        self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]
    ) -> tuple[Obj, Sequence[NodeInfo], bool]: ...


@runtime_checkable
class PostFilterTransformer(Plugin, Protocol):
    def after_post_filter(self, state: CycleState, pod: Obj, statuses: Mapping[str, Status]) -> None: ...


@runtime_checkable
class PreferNodesPlugin(Plugin, Protocol):
    def prefer_nodes(
        self, state: CycleState, pod: Obj, result: PreFilterResult | None
    ) -> Sequence[str] | Status:
        """The nodes to try first, in order; ``SKIP`` to search as usual; a rejection fails the cycle as a
        PreFilter rejection does."""


@runtime_checkable
class NextPodPlugin(Plugin, Protocol):
    def next_pod(self) -> Obj | None:
        """The pending pod to schedule next, or ``None`` to let the queue decide."""


@runtime_checkable
class ReservationRestorePlugin(Plugin, Protocol):
    """Give back, on the node the pod is filtered against, what the pod's matched reservations hold for it
    in the plugin's own accounting (reserved CPUs, devices). The Reservation plugin has already taken the
    matched reservations' reserve pods off ``node_info`` and the unmatched ones' owners' double count."""

    def pre_restore_reservation(self, state: CycleState, pod: Obj) -> Status | None:
        """Once per cycle, before any node is restored."""

    def restore_reservation(
        self,
        state: CycleState,
        pod: Obj,
        matched: Sequence[ReservationInfo],
        unmatched: Sequence[ReservationInfo],
        node_info: NodeInfo,
    ) -> tuple[Any, Status | None]:
        """Per node with reservations: ``matched`` the pod may use, ``unmatched`` (with owners) it may
        not; the plugin's restore state (kept for it, may be ``None``) and a failure."""


@runtime_checkable
class ReservationFilterPlugin(Plugin, Protocol):
    def filter_reservation(
        self, state: CycleState, pod: Obj, reservation: ReservationInfo, node_name: str
    ) -> Status | None:
        """At Filter: may the pod use ``reservation`` on its node (a rejection's reasons are shown)."""

    def filter_nominate_reservation(
        self, state: CycleState, pod: Obj, reservation: ReservationInfo, node_name: str
    ) -> Status | None:
        """When a reservation is nominated (PreScore or Reserve): may it be the pod's."""


@runtime_checkable
class ReservationScorePlugin(Plugin, Protocol):
    def score_reservation(
        self, state: CycleState, pod: Obj, reservation: ReservationInfo, node_name: str
    ) -> int:
        """0..100; the nominator prefers the reservation with the highest sum."""


@runtime_checkable
class ReservationNominator(Plugin, Protocol):
    def nominate_reservation(
        self, state: CycleState, pod: Obj, node_name: str
    ) -> tuple[ReservationInfo | None, Status | None]:
        """The reservation the pod will use on ``node_name`` (``None``: none); the same answer for the
        rest of the cycle."""


@runtime_checkable
class ReservationPreBindPlugin(Plugin, Protocol):
    def pre_bind_reservation(
        self, state: CycleState, reservation: ReservationInfo, node_name: str
    ) -> Status | None:
        """Binding a reserve pod: called instead of ``pre_bind`` (``reservation`` has ``status.nodeName``
        set); ``handle.patch_pod`` changes go onto the Reservation object."""


@runtime_checkable
class ReservationHooksUser(Plugin, Protocol):
    def use_reservation_hooks(self, hooks: ReservationHooks) -> None:
        """Called once the profile is built, with its plugins' reservation hooks (Koordinator's plugins
        reach them through the FrameworkExtender handle)."""


@runtime_checkable
class Controller(Protocol):
    """Koordinator's ``frameworkext.Controller``: ``sync`` runs every ``period`` seconds while this
    replica leads (a raising sync is logged, and runs again at the next period)."""

    @property
    def name(self) -> str: ...

    @property
    def period(self) -> float: ...

    def sync(self) -> None: ...


@runtime_checkable
class ControllerProvider(Plugin, Protocol):
    def new_controllers(self) -> Sequence[Controller]: ...


def plugin_controllers(profiles: Iterable[Mapping[str, Any]]) -> list[Controller]:
    """The controllers of the plugins of every profile (plugin name -> instance), each plugin's once
    (the first profile's instance), as Koordinator's ``ControllersMap`` registers them."""
    seen: set[str] = set()
    out: list[Controller] = []
    for plugins in profiles:
        for name, plugin in plugins.items():
            if name not in seen and isinstance(plugin, ControllerProvider):
                seen.add(name)
                out.extend(plugin.new_controllers())
    return out


ErrorHandler = Callable[[Obj, Status | Exception], bool]
"""``handler(pod, why)``: a pre-handler returning True takes over the failure."""
ForgetHandler = Callable[[Obj], None]


class Extensions:
    """The transformers of one profile (found on its plugins, in profile order)."""

    def __init__(self, plugins: Sequence[Any]) -> None:
        self.pre_filter = [p for p in plugins if isinstance(p, PreFilterTransformer)]
        self.filter = [p for p in plugins if isinstance(p, FilterTransformer)]
        self.score = [p for p in plugins if isinstance(p, ScoreTransformer)]
        self.post_filter = [p for p in plugins if isinstance(p, PostFilterTransformer)]
        self.next_pod = [p for p in plugins if isinstance(p, NextPodPlugin)]
        self.prefer_nodes = next((p for p in plugins if isinstance(p, PreferNodesPlugin)), None)

    def before_pre_filter(self, state: CycleState, pod: Obj) -> tuple[Obj, Status | None]:
        for p in self.pre_filter:
            pod, _, st = p.before_pre_filter(state, pod)
            if st is not None and not st.is_success:
                code = Code.ERROR if st.code is Code.ERROR else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
                return pod, Status(code, st.reasons, p.name)
        return pod, None

    def after_pre_filter(self, state: CycleState, pod: Obj, result: PreFilterResult | None) -> Status | None:
        for p in self.pre_filter:
            st = p.after_pre_filter(state, pod, result)
            if st is not None and not st.is_success:
                return st.with_plugin(p.name)
        return None

    def before_filter(self, state: CycleState, pod: Obj, node: NodeInfo) -> tuple[Obj, NodeInfo, bool]:
        transformed = False
        for p in self.filter:
            pod, node, changed = p.before_filter(state, pod, node)
            transformed |= changed
        return pod, node, transformed

    def before_score(
        self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]
    ) -> tuple[Obj, Sequence[NodeInfo], bool]:
        transformed = False
        for p in self.score:
            pod, nodes, changed = p.before_score(state, pod, nodes)
            transformed |= changed
        return pod, nodes, transformed

    def after_post_filter(self, state: CycleState, pod: Obj, statuses: Mapping[str, Status]) -> None:
        for p in self.post_filter:
            try:
                p.after_post_filter(state, pod, statuses)
            except Exception:
                log.exception("plugin %s: AfterPostFilter failed", p.name)


class FailureHooks:
    """The error and forget handlers plugins register through the handle (Koordinator's
    ``RegisterErrorHandlerFilters`` and ``RegisterForgetPodHandler``), shared by every profile."""

    def __init__(self) -> None:
        self.error_pre: list[ErrorHandler] = []
        self.error_post: list[ErrorHandler] = []
        self.forget: list[ForgetHandler] = []

    def handle_error(self, pod: Obj, why: Status | Exception, default: Callable[[], None]) -> bool:
        """Pre-handlers first (one that returns True takes over), else the default, then post-handlers;
        whether the default ran."""
        ran = not any(_safe(h, pod, why) for h in self.error_pre)
        if ran:
            default()
        for h in self.error_post:
            _safe(h, pod, why)
        return ran

    def forgotten(self, pod: Obj) -> None:
        for h in self.forget:
            try:
                h(pod)
            except Exception:
                log.exception("forget-pod handler failed")


def _safe(handler: ErrorHandler, pod: Obj, why: Status | Exception) -> bool:
    try:
        return bool(handler(pod, why))
    except Exception:
        log.exception("scheduling-failure handler failed")
        return False


class ReservationHooks:
    """The reservation hooks of one profile's plugins, in profile order (Koordinator's
    ``RunReservationExtension*``, ``RunReservationFilterPlugins``, ``RunNominateReservationFilterPlugins``,
    ``RunReservationScorePlugins``); the nominator is the first plugin that nominates."""

    def __init__(self, plugins: Sequence[Any]) -> None:
        self.restorers = [p for p in plugins if isinstance(p, ReservationRestorePlugin)]
        self.filters = [p for p in plugins if isinstance(p, ReservationFilterPlugin)]
        self.scorers = [p for p in plugins if isinstance(p, ReservationScorePlugin)]
        self.nominator = next((p for p in plugins if isinstance(p, ReservationNominator)), None)

    def pre_restore(self, state: CycleState, pod: Obj) -> Status | None:
        return _first_failure([(p.name, p.pre_restore_reservation) for p in self.restorers], state, pod)

    def restore(
        self,
        state: CycleState,
        pod: Obj,
        matched: Sequence[ReservationInfo],
        unmatched: Sequence[ReservationInfo],
        node_info: NodeInfo,
    ) -> tuple[dict[str, Any], Status | None]:
        """Every restore plugin on one node: their states by plugin name, and the first failure."""
        states: dict[str, Any] = {}
        for p in self.restorers:
            kept, st = p.restore_reservation(state, pod, matched, unmatched, node_info)
            if st is not None and not st.is_success:
                return states, st.with_plugin(p.name)
            if kept is not None:
                states[p.name] = kept
        return states, None

    def filter(self, state: CycleState, pod: Obj, reservation: ReservationInfo, node: str) -> Status | None:
        return _first_failure(
            [(p.name, p.filter_reservation) for p in self.filters], state, pod, reservation, node
        )

    def filter_nominate(
        self, state: CycleState, pod: Obj, reservation: ReservationInfo, node: str
    ) -> Status | None:
        calls = [(p.name, p.filter_nominate_reservation) for p in self.filters]
        return _first_failure(calls, state, pod, reservation, node)

    def scores(
        self, state: CycleState, pod: Obj, reservations: Sequence[ReservationInfo], node: str
    ) -> list[int]:
        """The sum of every score plugin's score of each reservation (each 0..100, else ValueError)."""
        totals = [0] * len(reservations)
        for p in self.scorers:
            for i, r in enumerate(reservations):
                score = int(p.score_reservation(state, pod, r, node))
                if not 0 <= score <= MAX_NODE_SCORE:
                    raise ValueError(f"plugin {p.name} scored reservation {r.name} {score}, not in 0..100")
                totals[i] += score
        return totals

    def nominate(
        self, state: CycleState, pod: Obj, node: str
    ) -> tuple[ReservationInfo | None, Status | None]:
        """The reservation the pod uses on ``node`` (``None``: none, or no nominator in the profile)."""
        if self.nominator is None:
            return None, None
        return self.nominator.nominate_reservation(state, pod, node)


def _first_failure(calls: Sequence[tuple[str, Callable[..., Status | None]]], *args: Any) -> Status | None:
    """The first of ``fn(*args)`` over ``calls`` that fails, with its plugin's name."""
    for name, fn in calls:
        st = fn(*args)
        if st is not None and not st.is_success:
            return st.with_plugin(name)
    return None
