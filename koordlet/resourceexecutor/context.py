"""What every write kind of one executor shares: clock, audit log, metrics, lock, force period, dry run.

Layer: ``koordlet.resourceexecutor``. The executor makes one :class:`WriteContext` and hands it to each
write kind (cgroups, resctrl, system tunables, tc), so they skip, re-apply, audit, count and report
failures the same way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from koordlet.api import CgroupUpdate, UpdateResult
from koordlet.resourceexecutor.audit import AuditLog
from koordlet.resourceexecutor.metrics import ExecutorMetrics

log = logging.getLogger("koordlet.resourceexecutor")


@dataclass(frozen=True, slots=True)
class WriteContext:
    clock: Callable[[], float]
    audit: AuditLog
    metrics: ExecutorMetrics
    lock: threading.RLock
    force_seconds: float
    """Owned values are re-checked and re-applied this often."""
    dry_run: bool

    def failed(self, u: CgroupUpdate, kind: str, message: str) -> UpdateResult:
        """A refused or failed update: logged, counted under ``kind``, reported with ``message``."""
        log.warning("%s (owner %s, reason %s)", message, u.owner, u.reason or "-")
        self.metrics.count_error(u.resource, kind)
        return UpdateResult(u, False, error=message)

    def unsupported(self, u: CgroupUpdate, why: str) -> UpdateResult:
        """This kernel (or host) does not offer the resource: skipped, counted, never an error."""
        log.debug("skip %s in %s: %s", u.resource, u.cgroup_dir or "-", why)
        self.metrics.count_error(u.resource, "unsupported")
        return UpdateResult(u, False, skipped="unsupported")
