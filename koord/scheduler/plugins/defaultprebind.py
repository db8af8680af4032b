"""DefaultPreBind (PreBind): sends the one merged PATCH of every PreBind plugin's metadata changes
(Koordinator's ``defaultprebind`` and ``PreBindExtensions.ApplyPatch``). Plugins earlier at PreBind add
their changes with ``handle.patch_pod(state, patch)``; enable this plugin last at PreBind."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from koord.scheduler.framework import CycleState, Handle, Obj, SchedulerHandle, Status

NAME = "DefaultPreBind"
__all__ = ["NAME", "DefaultPreBind"]  # the built-in table loads the plugin by these names


class DefaultPreBind:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Handle) -> None:
        if args:
            raise ValueError(f"takes no args, got {sorted(args)}")
        if not hasattr(handle, "apply_patch"):
            raise ValueError("runs in koord-scheduler only (its handle writes to the API server)")
        self.handle = cast(SchedulerHandle, handle)

    def pre_bind(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        return self.handle.apply_patch(state, pod)
