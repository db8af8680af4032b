"""DefaultBinder (Bind): ``POST pods/<name>/binding`` with the pod's UID as precondition, through the
scheduler's API (kube-scheduler's ``defaultbinder``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from koord.scheduler.framework import CycleState, Handle, Obj, SchedulerHandle, Status

NAME = "DefaultBinder"
__all__ = ["NAME", "DefaultBinder"]  # the built-in table loads the plugin by these names


class DefaultBinder:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Handle) -> None:
        if args:
            raise ValueError(f"takes no args, got {sorted(args)}")
        if not hasattr(handle, "bind_pod"):
            raise ValueError("runs in koord-scheduler only (its handle writes to the API server)")
        self.handle = cast(SchedulerHandle, handle)

    def bind(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        return self.handle.bind_pod(pod, node_name)
