"""Builders for the Coscheduling tests: Koordinator's shipped profile (Coscheduling at every point it is
enabled at in ``config/manager/scheduler-config.yaml``), gang pods of the annotation way and the PodGroup
way, and a MemoryScheduler on it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.extension.coscheduling import (
    GANG_GROUPS,
    GANG_MIN_AVAILABLE,
    GANG_MODE,
    GANG_NAME,
    GANG_WAITING_TIME,
    POD_GROUP_LABEL,
)
from koordshared.testing import node, pod

S = "koord-scheduler"
CO = "Coscheduling"


def profile(args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    on = [{"name": CO}]
    out: dict[str, Any] = {
        "schedulerName": S,
        "plugins": {
            "preEnqueue": {"enabled": on},
            "preFilter": {"enabled": on},
            "postFilter": {"disabled": [{"name": "*"}], "enabled": [*on, {"name": "DefaultPreemption"}]},
            "preScore": {"enabled": on},
            "score": {"enabled": [{"name": CO, "weight": 1}]},
            "reserve": {"enabled": on},
            "permit": {"enabled": on},
            "preBind": {"enabled": [{"name": CO}, {"name": "DefaultPreBind"}]},
            "postBind": {"enabled": on},
        },
    }
    if args is not None:
        out["pluginConfig"] = [{"name": CO, "args": dict(args)}]
    return out


def kit(nodes: int = 0, cpu: str = "1", args: Mapping[str, Any] | None = None) -> MemoryScheduler:
    k = MemoryScheduler({"profiles": [profile(args)]})
    for i in range(nodes):
        k.add_node(node(f"n{i}", cpu, "8Gi"))
    return k


def member(
    name: str,
    gang: str,
    min_available: int | str | None,
    *,
    mode: str = "",
    waiting: str = "",
    groups: list[str] | None = None,
    cpu: str = "1",
    gates: list[str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod of the annotation way (``min_available=None`` leaves the annotation out; ``annotations``:
    more of them)."""
    ann = {GANG_NAME: gang, **(annotations or {})}
    if min_available is not None:
        ann[GANG_MIN_AVAILABLE] = str(min_available)
    if mode:
        ann[GANG_MODE] = mode
    if waiting:
        ann[GANG_WAITING_TIME] = waiting
    if groups is not None:
        ann[GANG_GROUPS] = json.dumps(groups)
    p = pod(name, requests={"cpu": cpu}, annotations=ann, scheduler_name=S, uid=f"uid-{name}")
    if gates:
        p["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return p


def pg_member(name: str, group: str, cpu: str = "1", owner: str = "") -> dict[str, Any]:
    """A pod of the PodGroup way."""
    p = pod(name, requests={"cpu": cpu}, labels={POD_GROUP_LABEL: group}, scheduler_name=S, uid=f"uid-{name}")
    if owner:
        p["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": "j"}
        ]
    return p


def pod_group(name: str, min_member: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"pg-{name}",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"minMember": min_member, **spec},
    }


def messages(k: MemoryScheduler, name: str, reason: str = "FailedScheduling") -> list[str]:
    """The Events' messages about ``default/<name>`` with ``reason``."""
    return [e[3] for e in k.api.events if e[0] == f"default/{name}" and e[2] == reason]


def condition(k: MemoryScheduler, name: str) -> Mapping[str, Any] | None:
    """The last PodScheduled condition written for ``default/<name>``."""
    writes = [c for c, _ in k.api.statuses.get(f"default/{name}", []) if c is not None]
    return writes[-1] if writes else None


def uid(name: str) -> str:
    return f"uid-{name}"


def eventually(check: Any, timeout: float = 10.0) -> Any:
    """``check()`` once it is truthy (status writes go out on the scheduler's status threads)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.01)
