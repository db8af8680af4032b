"""Builders for the Reservation tests: Koordinator's shipped profile for the plugin (Reservation at every
point ``config/manager/scheduler-config.yaml`` enables it, score weight 5000, Bind before DefaultBinder),
a MemoryScheduler on it with a fake clock, and shortcuts to read what the scheduler wrote."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from koord.scheduler.framework import PluginFactory
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.core import pod as podutil
from koordshared.apis.meta.quantity import format_time
from koordshared.apis.scheduling import reservation as rsv
from koordshared.testing import FakeClock, node, pod

S = "koord-scheduler"
R = "Reservation"


def profile(args: Mapping[str, Any] | None = None, extra: Sequence[str] = ()) -> dict[str, Any]:
    """Reservation where Koordinator enables it (and the ``extra`` plugins at the same points)."""
    on = [{"name": R}, *({"name": n} for n in extra)]
    out: dict[str, Any] = {
        "schedulerName": S,
        "plugins": {
            "preFilter": {"enabled": list(on)},
            "filter": {"enabled": list(on)},
            "postFilter": {
                "disabled": [{"name": "*"}],
                "enabled": [{"name": R}, {"name": "DefaultPreemption"}],
            },
            "preScore": {"enabled": list(on)},
            "score": {"enabled": [{"name": R, "weight": 5000}]},
            "reserve": {"enabled": list(on)},
            "preBind": {"enabled": [*on, {"name": "DefaultPreBind"}]},
            "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": R}, {"name": "DefaultBinder"}]},
        },
    }
    if args is not None:
        out["pluginConfig"] = [{"name": R, "args": dict(args)}]
    return out


def kit(
    nodes: Mapping[str, str] | None = None,
    args: Mapping[str, Any] | None = None,
    plugins: Mapping[str, PluginFactory] | None = None,
) -> MemoryScheduler:
    """A MemoryScheduler on the profile, with nodes (name -> cpu, 16Gi each)."""
    k = MemoryScheduler(
        {"profiles": [profile(args, tuple(plugins or ()))]}, plugins=plugins, clock=FakeClock()
    )
    for name, cpu in (nodes or {}).items():
        k.add_node(node(name, cpu, "16Gi"))
    return k


def add(k: MemoryScheduler, r: Mapping[str, Any]) -> None:
    """Create (or replace) a Reservation, as the informer would tell it (created now unless it says)."""
    meta = dict(r["metadata"])
    meta.setdefault("creationTimestamp", format_time(k.clock.wall()))
    k.informers["reservations"].put({**r, "metadata": meta})


def get(k: MemoryScheduler, name: str) -> Mapping[str, Any]:
    found = k.informers["reservations"].get(name)
    assert found is not None, f"reservation {name} is gone"
    return found


def phase(k: MemoryScheduler, name: str) -> str:
    return rsv.phase_of(get(k, name))


def owner(name: str, cpu: str, labels: Mapping[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    """A pending pod of the profile asking for ``cpu``."""
    return pod(name, requests={"cpu": cpu}, scheduler_name=S, labels=dict(labels or {}), **kw)


def allocated_to(k: MemoryScheduler, pod_name: str) -> str:
    """The reservation name in the pod's ``reservation-allocated`` (``""``: none)."""
    cached = k.pods.get(f"default/{pod_name}")
    assert cached is not None
    raw = (cached["metadata"].get("annotations") or {}).get(rsv.ANNOTATION_RESERVATION_ALLOCATED)
    return str(json.loads(raw)["name"]) if raw else ""


def node_requested(k: MemoryScheduler, name: str, resource: str = "cpu") -> int:
    """What the scheduler's cache counts on the node (as the next cycle's snapshot starts)."""
    k.cache.update_snapshot(k.snapshot)
    info = k.snapshot.node_info(name)
    assert info is not None
    return info.requested.get(resource, 0)


def condition(k: MemoryScheduler, name: str, kind: str) -> Mapping[str, Any]:
    found = podutil.condition(get(k, name), kind)
    return found or {}
