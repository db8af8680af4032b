"""Permit, PreBind, Bind and PostBind (kube-scheduler's ``RunPermitPlugins`` ... ``RunPostBindPlugins``).

Permit: each plugin allows (``None``), holds the pod (``Wait`` with a timeout, capped at 15 minutes, the
first reported cap being kube-scheduler's) or rejects it. PreBind: the first failure stops the binding.
Bind: the first plugin that does not answer ``SKIP`` decides. PostBind: informational, errors logged.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from koord.scheduler.framework.interface import MAX_PERMIT_WAIT, SKIP, Code, CycleState, Status
from koord.scheduler.framework.pointtiming import extension_point
from koord.scheduler.framework.runtime import PluginFailure, call, call_status
from koord.scheduler.framework.types import Obj

if TYPE_CHECKING:
    from koord.scheduler.framework.runtime import Framework

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
    for e in fw.points.get("preBind", ()):
        start = time.perf_counter()
        try:
            st = call_status(e.name, "preBind", e.plugin.pre_bind, state, pod, node_name)
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
