"""PrioritySort (QueueSort): higher ``spec.priority`` first, then the pod that entered the queue first
(kube-scheduler's ``queuesort.PrioritySort``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NAME = "PrioritySort"
__all__ = ["NAME", "PrioritySort"]  # the built-in table loads the plugin by these names


class PrioritySort:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        if args:
            raise ValueError(f"takes no args, got {sorted(args)}")

    def less(self, a: Any, b: Any) -> bool:
        if a.priority != b.priority:
            return bool(a.priority > b.priority)
        return bool(a.timestamp < b.timestamp)
