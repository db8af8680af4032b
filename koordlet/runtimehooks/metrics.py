"""The runtime hooks' Prometheus metrics, koordlet's names and labels (``koordlet.metricdefs``):
``koordlet_runtime_hook_invoked_duration_milliseconds{hook, stage, status}`` per hook answer and
``koordlet_runtime_hook_reconciler_invoked_duration_milliseconds{level, resource_type, status}`` per pass
(``level`` ``allpods`` for a full pass, ``pod`` for a pass over changed pods; ``resource_type`` ``all``).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from koordlet import metricdefs
from koordlet.metricdefs import STATUS_FAILED, STATUS_SUCCEEDED
from koordlet.runtimehooks.reconciler import PassReport


class HookMetrics:
    def __init__(self, registry: CollectorRegistry, node: str) -> None:
        self.node = node
        self._hook = metricdefs.histogram(metricdefs.RUNTIME_HOOK_INVOKED_DURATION_MILLISECONDS, registry)
        self._pass = metricdefs.histogram(
            metricdefs.RUNTIME_HOOK_RECONCILER_INVOKED_DURATION_MILLISECONDS, registry
        )

    def hook(self, hook: str, stage: str, seconds: float, ok: bool) -> None:
        status = STATUS_SUCCEEDED if ok else STATUS_FAILED
        self._hook.labels(self.node, hook, stage, status).observe(seconds * 1000.0)

    def reconciled(self, report: PassReport) -> None:
        status = STATUS_FAILED if report.errors else STATUS_SUCCEEDED
        level = "allpods" if report.full else "pod"
        self._pass.labels(self.node, level, "all", status).observe(report.seconds * 1000.0)
