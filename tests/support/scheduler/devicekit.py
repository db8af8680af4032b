"""Builders for the DeviceShare tests: the plugin over a real snapshot with its own informer caches
(``pluginrun`` with a handle), the allocation it would make for a pod on a node, and koord-scheduler's
shipped profile with DeviceShare at the points Koordinator enables it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from koord.scheduler.framework import CycleState, Obj, PodInfo
from koord.scheduler.plugins.deviceshare import NAME
from koord.scheduler.plugins.deviceshare.state import STATE_KEY
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.extension.deviceshare import ANNOTATION_DEVICE_ALLOCATED
from tests.support.scheduler.pluginrun import PluginRun

S = "koord-scheduler"
GI = 1024**3


def run(
    nodes: Iterable[Obj],
    devices: Iterable[Obj] = (),
    pods: Iterable[Obj] = (),
    args: Mapping[str, Any] | None = None,
) -> PluginRun:
    return PluginRun(NAME, args, nodes=nodes, pods=pods, handle=True, objects={"devices": list(devices)})


def allocation(r: PluginRun, pod: Obj, node: str) -> dict[str, list[tuple[int, dict[str, int]]]] | str:
    """What Reserve allocates for ``pod`` on ``node`` (type -> (minor, resources)), or why it cannot; the
    allocation is released again."""
    state = CycleState(PodInfo(pod))
    pre = r.plugin.pre_filter(state, pod)
    if pre is not None and not pre.is_success and pre.code.name != "SKIP":
        return pre.message
    st = r.plugin.reserve(state, pod, node)
    if st is not None:
        return st.message
    result = state.read(STATE_KEY).result
    r.plugin.unreserve(state, pod, node)
    return {t: [(a.minor, dict(a.resources)) for a in allocs] for t, allocs in (result or {}).items()}


def profile(args: Mapping[str, Any] | None = None, *, hint: bool = False) -> dict[str, Any]:
    """DeviceShare where Koordinator's shipped profile enables it (SchedulingHint too with ``hint``)."""
    on = [{"name": NAME}]
    pre_filter = [{"name": "SchedulingHint"}, *on] if hint else on
    out: dict[str, Any] = {
        "schedulerName": S,
        "plugins": {
            "preFilter": {"enabled": pre_filter},
            "filter": {"enabled": on},
            "score": {"enabled": [{"name": NAME, "weight": 1}]},
            "reserve": {"enabled": on},
            "preBind": {"enabled": [*on, {"name": "DefaultPreBind"}]},
        },
    }
    if args is not None:
        out["pluginConfig"] = [{"name": NAME, "args": dict(args)}]
    return out


def kit(args: Mapping[str, Any] | None = None, *, hint: bool = False) -> MemoryScheduler:
    return MemoryScheduler({"profiles": [profile(args, hint=hint)]})


def annotation(k: MemoryScheduler, key: str) -> str:
    """The device-allocated annotation of the pod ``namespace/name`` as the caches hold it."""
    return str(
        ((k.pods.get(key) or {}).get("metadata") or {})
        .get("annotations", {})
        .get(ANNOTATION_DEVICE_ALLOCATED, "")
    )
