"""A pod in the scheduling queue (kube-scheduler's ``QueuedPodInfo``): the pod, when it entered the
queue, how many attempts it had, and which plugins rejected or gate it (they decide which cluster events
requeue it)."""

from __future__ import annotations

from koord.scheduler.framework.types import Obj, PodInfo


class QueuedPodInfo:
    __slots__ = (
        "attempts",
        "early",
        "error",
        "gate_message",
        "gating_plugin",
        "info",
        "initial_attempt",
        "last_failure",
        "pending_plugins",
        "popped_cycle",
        "timestamp",
        "unschedulable_plugins",
    )

    def __init__(self, info: PodInfo, timestamp: float) -> None:
        self.info = info
        self.timestamp = timestamp
        """When the pod entered the queue (PrioritySort orders equal priorities by it)."""
        self.attempts = 0
        self.initial_attempt: float | None = None
        self.last_failure = timestamp
        self.unschedulable_plugins: set[str] = set()
        self.pending_plugins: set[str] = set()
        self.gating_plugin = ""
        self.gate_message = ""
        self.error = False
        """The last attempt failed with an error (not a rejection): retried after the backoff."""
        self.popped_cycle = 0
        self.early = False
        """This attempt was taken from backoffQ before its backoff ran out (an idle loop's early pop)."""

    @property
    def pod(self) -> Obj:
        return self.info.pod

    @property
    def uid(self) -> str:
        return self.info.uid

    @property
    def priority(self) -> int:
        return self.info.priority

    def __repr__(self) -> str:
        return f"QueuedPodInfo({self.info.key}, attempts={self.attempts})"
