"""Permit, PreBind, Bind and PostBind (kube-scheduler's ``RunPermitPlugins`` ... ``RunPostBindPlugins``).

Permit: each plugin allows (``None``), holds the pod (``Wait`` with a timeout, capped at 15 minutes, the
first reported cap being kube-scheduler's) or rejects it. PreBind: the first failure stops the binding (a
reserve pod's PreBind is its reservation's, see :func:`run_pre_bind`).
Bind: the first plugin that does not answer ``SKIP`` decides. PostBind: informational, errors logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from koord.scheduler.framework.extension import ReservationPreBindPlugin
from koord.scheduler.framework.interface import MAX_PERMIT_WAIT, SKIP, Code, CycleState, Status
from koord.scheduler.framework.pointtiming import extension_point
from koord.scheduler.framework.reservation import ASSUMED_RESERVATION, ReservationInfo, is_reserve_pod
from koord.scheduler.framework.runtime import PluginFailure, call, call_status
from koord.scheduler.framework.types import Obj

if TYPE_CHECKING:
    from koord.scheduler.framework.runtime import Enabled, Framework

log = logging.getLogger(__name__)


@extension_point("Permit")
def run_permit(
    fw: Framework, state: CycleState, pod: Obj, node_name: str
) -> tuple[Status | None, dict[str, float]]:
    """``(None, {})``: allowed; ``(Wait, {plugin: seconds})``: held by those plugins, the Wait status
    giving each one's reason in that order; a rejection."""
    waits: dict[str, float] = {}
    reasons: list[str] = []
    for e in fw.points.get("permit", ()):
        start = time.perf_counter()
        answer = call(e.name, "permit", e.plugin.permit, state, pod, node_name)
        fw.timed(e.name, "permit", start)
        st, timeout = answer if isinstance(answer, tuple) else (answer, 0.0)
        if st is None or st.is_success:
            continue
        if st.code is Code.WAIT:
            if timeout > MAX_PERMIT_WAIT:
                log.warning(
                    "plugin %s asked pod %s to wait %.0fs at Permit: capped at %.0fs (the framework's limit)",
                    e.name,
                    _key(pod),
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
def run_pre_bind(fw: Framework, state: CycleState, pod: Obj, node_name: str) -> Status | None:
    """PreBind plugins in order; a reserve pod is no pod: its PreBind is the PreBind plugins'
    ``pre_bind_reservation`` (those that have one, in PreBind order), given the reservation its cycle
    placed, and their ``patch_pod`` changes go onto the Reservation (Koordinator's ``RunPreBindPlugins``
    for a reserve pod)."""
    if not is_reserve_pod(pod):
        return _each_pre_bind(
            fw, [(e, e.plugin.pre_bind) for e in fw.points.get("preBind", ())], state, pod, node_name
        )
    reservation = state.get(ASSUMED_RESERVATION)
    if not isinstance(reservation, ReservationInfo):
        return Status(Code.ERROR, ("no reservation was placed in this reserve pod's cycle",))
    calls = [
        (e, e.plugin.pre_bind_reservation)
        for e in fw.points.get("preBind", ())
        if isinstance(e.plugin, ReservationPreBindPlugin)
    ]
    return _each_pre_bind(fw, calls, state, reservation, node_name)


def _each_pre_bind(
    fw: Framework, calls: list[tuple[Enabled, Callable[..., Any]]], state: CycleState, subject: Any, node: str
) -> Status | None:
    """The first failure of ``fn(state, subject, node)`` over ``calls``."""
    for e, fn in calls:
        start = time.perf_counter()
        try:
            st = call_status(e.name, "preBind", fn, state, subject, node)
        except PluginFailure as err:
            st = Status(Code.ERROR, (str(err),))
        fw.timed(e.name, "preBind", start)
        if st is not None and not st.is_success:
            return st.with_plugin(e.name)
    return None


@extension_point("Bind")
def run_bind(fw: Framework, state: CycleState, pod: Obj, node_name: str) -> Status:
    """The first Bind plugin that does not skip; ``SKIP`` when every one skipped."""
    for e in fw.points.get("bind", ()):
        start = time.perf_counter()
        try:
            st = call(e.name, "bind", e.plugin.bind, state, pod, node_name)
        except PluginFailure as err:
            st = Status(Code.ERROR, (err.detail,))
        fw.timed(e.name, "bind", start)
        if st is None or st.code is Code.SUCCESS:
            return Status(Code.SUCCESS, (), e.name)
        if st.code is Code.SKIP:
            continue
        # kube-scheduler's RunBindPlugins wording, which operators see in FailedScheduling Events
        return Status(st.code, (f'running Bind plugin "{e.name}": {st.message}',), e.name)
    return SKIP


@extension_point("PostBind")
def run_post_bind(fw: Framework, state: CycleState, pod: Obj, node_name: str) -> None:
    for e in fw.points.get("postBind", ()):
        try:
            e.plugin.post_bind(state, pod, node_name)
        except Exception:
            log.exception("plugin %s: postBind of %s on %s failed", e.name, _key(pod), node_name)


def _key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
