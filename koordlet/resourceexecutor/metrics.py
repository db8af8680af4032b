"""The executor's Prometheus metrics, registered on the registry the agent injects (never the global one).

Layer: ``koordlet.resourceexecutor``. Names follow koordlet
(``koordlet_resource_update_duration_milliseconds``).
"""

from __future__ import annotations

import errno

from prometheus_client import CollectorRegistry, Counter

from koordlet import metricdefs


class ExecutorMetrics:
    """Update durations by resource type and outcome; failures and skips by kind."""

    def __init__(self, registry: CollectorRegistry) -> None:
        # koordlet's buckets (0.01 ms x 4^k): a cgroup write is 5-60 us, a batch a few ms.
        self.duration = metricdefs.histogram(metricdefs.RESOURCE_UPDATE_DURATION_MILLISECONDS, registry)
        self.errors = Counter(
            metricdefs.RESOURCE_UPDATE_ERRORS.name,
            metricdefs.RESOURCE_UPDATE_ERRORS.help,
            ["type", "kind"],
            registry=registry,
        )

    def observe(self, resource: str, status: str, millis: float) -> None:
        self.duration.labels(type=resource, status=status).observe(millis)

    def count_error(self, resource: str, kind: str) -> None:
        self.errors.labels(type=resource, kind=kind).inc()


def errno_kind(err_no: int | None) -> str:
    """Metric label for a failed syscall: the errno name in lower case (``einval``, ``ebusy``)."""
    if err_no is None:
        return "other"
    return errno.errorcode.get(err_no, str(err_no)).lower()
