"""What every write kind of one executor shares: clock, audit log, metrics, lock, force period, dry run.

Layer: ``koordlet.resourceexecutor``. The executor makes one :class:`WriteContext` and hands it to each
write kind (cgroups, resctrl, system tunables, tc), so they skip, re-apply, audit, count and report
failures the same way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from koordlet.api import CgroupUpdate, UpdateResult
from koordlet.resourceexecutor.audit import AuditLog
from koordlet.resourceexecutor.metrics import ExecutorMetrics

log = logging.getLogger("koordlet.resourceexecutor")

WARNED_KEYS = 4096
"""Bound of the repeated-failure memory (a node's cgroups; forgotten all at once when full)."""


@dataclass(frozen=True, slots=True)
class WriteContext:
    clock: Callable[[], float]
    audit: AuditLog
    metrics: ExecutorMetrics
    lock: threading.RLock
    force_seconds: float
    """Owned values are re-checked and re-applied this often."""
    dry_run: bool
    _warned: dict[tuple[str, str, str], tuple[str, float]] = field(default_factory=dict)
    """(owner, resource, dir) -> the last failure logged at warning level and when."""

    def failed(self, u: CgroupUpdate, kind: str, message: str) -> UpdateResult:
        """A refused or failed update: logged, counted under ``kind``, reported with ``message``.

        A plugin asks for the same refused value every tick until its policy changes: the same failure
        is logged at warning level once per force period, and at debug level in between.
        """
        key, now = (u.owner, u.resource, u.cgroup_dir), self.clock()
        last = self._warned.get(key)
        repeated = last is not None and last[0] == message and now - last[1] < self.force_seconds
        if not repeated:
            if len(self._warned) >= WARNED_KEYS:
                self._warned.clear()
            self._warned[key] = (message, now)
        log.log(
            logging.DEBUG if repeated else logging.WARNING,
            "%s (owner %s, reason %s)",
            message,
            u.owner,
            u.reason or "-",
        )
        self.metrics.count_error(u.resource, kind)
        return UpdateResult(u, False, error=message)

    def unsupported(self, u: CgroupUpdate, why: str) -> UpdateResult:
        """This kernel (or host) does not offer the resource: skipped, counted, never an error."""
        log.debug("skip %s in %s: %s", u.resource, u.cgroup_dir or "-", why)
        self.metrics.count_error(u.resource, "unsupported")
        return UpdateResult(u, False, skipped="unsupported")
