"""resctrl writes for the executor: ``schemata`` (cached, compared per cache domain) and ``tasks``.

Layer: ``koordlet.resourceexecutor``. Paths and parsing come from ``koordlet.system.resctrl``; the write
itself is ``native.write_schemata``, which returns the kernel's ``info/last_cmd_status`` on failure (resctrl
explains EINVAL only there). ``tasks`` takes one TID per write(2), so only missing TIDs are written.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from koordlet.api import CgroupUpdate, UpdateResult
from koordlet.errors import InvalidValue, UnsafePath
from koordlet.resourceexecutor.context import WriteContext
from koordlet.resourceexecutor.metrics import errno_kind
from koordlet.system import native, resctrl
from koordlet.system.files import GONE_ERRNOS, read_text_unless_gone
from koordlet.system.paths import HostPaths

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Owned:
    update: CgroupUpdate
    checked: float


def _covers(current: resctrl.Schemata, wanted: resctrl.Schemata) -> bool:
    """The kernel changes only the domains named in a write; equal there means nothing to do."""
    return all(current.l3.get(i) == m for i, m in wanted.l3.items()) and all(
        current.mb.get(i) == v for i, v in wanted.mb.items()
    )


class ResctrlWrites:
    """Owned by a ``ResourceExecutor``; shares its :class:`WriteContext`."""

    def __init__(self, paths: HostPaths, ctx: WriteContext, *, force_python: bool) -> None:
        self.paths = paths
        self._ctx = ctx
        self._force_python = force_python
        self._owned: dict[str, _Owned] = {}
        self.schemata_writer: Callable[[Path, str, Path], native.SchemataResult] = functools.partial(
            native.write_schemata, force_python=force_python
        )
        """``native.write_schemata`` unless a test injects a failing one."""

    def update_schemata(
        self, group: str, text: str, *, owner: str, reason: str = "", force: bool = False
    ) -> UpdateResult:
        """Make ``group``'s schemata hold the L3/MB domains in ``text``; others are left alone."""
        u = CgroupUpdate("schemata", group, text, owner, reason)
        with self._ctx.lock:
            try:
                path = resctrl.schemata_path(self.paths, group)
                wanted = resctrl.parse_schemata(text)
            except (UnsafePath, InvalidValue) as err:
                return self._ctx.failed(u, "invalid", f"refused schemata {text!r} for group {group!r}: {err}")
            if not wanted.l3 and not wanted.mb:
                return self._ctx.failed(u, "invalid", f"refused schemata {text!r}: no L3 or MB line")
            key = str(path)
            now = self._ctx.clock()
            owned = self._owned.get(key)
            if (
                not force
                and owned is not None
                and owned.update.value == text
                and now - owned.checked < self._ctx.force_seconds
            ):
                return UpdateResult(u, False, skipped="unchanged")
            try:
                raw = read_text_unless_gone(path)
            except OSError as err:
                return self._ctx.failed(u, "read", f"read {path} failed: {err}")
            if raw is None:
                self._owned.pop(key, None)
                self._ctx.metrics.count_error("schemata", "gone")
                return UpdateResult(u, False, skipped="gone")
            try:
                unchanged = _covers(resctrl.parse_schemata(raw), wanted)
            except InvalidValue:
                unchanged = False
            if unchanged:
                self._owned[key] = _Owned(u, now)
                return UpdateResult(u, False, skipped="unchanged")
            out = resctrl.format_schemata(wanted)
            if self._ctx.dry_run:
                log.info("dry-run: would write %r to %s (owner %s: %s)", out, path, owner, reason)
                return UpdateResult(u, False, skipped="dry-run")
            status = self.paths.resctrl_root / "info" / "last_cmd_status"
            res = self.schemata_writer(path, out, status)
            if res.ok:
                self._owned[key] = _Owned(u, now)
                self._ctx.audit.record(
                    owner=owner,
                    reason=reason,
                    resource="schemata",
                    path=key,
                    before=raw.strip(),
                    after=out.strip(),
                )
                return UpdateResult(u, True)
            if res.errno in GONE_ERRNOS:
                self._owned.pop(key, None)
                self._ctx.metrics.count_error("schemata", "gone")
                return UpdateResult(u, False, skipped="gone")
            kind = errno_kind(res.errno)
            return self._ctx.failed(
                u,
                kind,
                f"write {out!r} to {path} failed: [errno {res.errno}] {os.strerror(res.errno)}"
                f" (last_cmd_status: {res.message or '-'})",
            )

    def update_tasks(self, group: str, tids: Iterable[int], *, owner: str, reason: str = "") -> UpdateResult:
        """Move the TIDs not yet in ``group`` into it, one write each; exited threads are ignored."""
        wanted = sorted(set(tids))
        u = CgroupUpdate("tasks", group, ",".join(map(str, wanted)), owner, reason, cacheable=False)
        with self._ctx.lock:
            try:
                path = resctrl.tasks_path(self.paths, group)
                raw = read_text_unless_gone(path)
            except UnsafePath as err:
                return self._ctx.failed(u, "invalid", f"refused tasks for group {group!r}: {err}")
            except OSError as err:
                return self._ctx.failed(u, "read", f"read resctrl tasks of {group!r} failed: {err}")
            if raw is None:
                self._ctx.metrics.count_error("tasks", "gone")
                return UpdateResult(u, False, skipped="gone")
            missing = resctrl.tasks_to_append(resctrl.parse_tasks(raw), wanted)
            if not missing:
                return UpdateResult(u, False, skipped="unchanged")
            if self._ctx.dry_run:
                log.info("dry-run: would move %d tasks into %s (owner %s)", len(missing), path, owner)
                return UpdateResult(u, False, skipped="dry-run")
            errs = native.write_batch([(path, str(t)) for t in missing], force_python=self._force_python)
            moved = [t for t, e in zip(missing, errs, strict=True) if e == 0]
            # ESRCH: the thread exited between listing and moving it
            failed = [(t, e) for t, e in zip(missing, errs, strict=True) if e not in (0, errno.ESRCH)]
            if moved:
                self._ctx.audit.record(
                    owner=owner,
                    reason=reason,
                    resource="tasks",
                    path=str(path),
                    before=None,
                    after=",".join(map(str, moved)),
                )
            if failed:
                t, e = failed[0]
                kind = errno_kind(e)
                return self._ctx.failed(
                    u,
                    kind,
                    f"write {str(t)!r} to {path} failed: [errno {e}] {os.strerror(e)} ({len(failed)} TIDs)",
                )
            return UpdateResult(u, bool(moved), skipped="" if moved else "gone")

    def reconcile_owned(self) -> list[UpdateResult]:
        with self._ctx.lock:
            now = self._ctx.clock()
            due = [o.update for o in self._owned.values() if now - o.checked >= self._ctx.force_seconds]
            return [
                self.update_schemata(u.cgroup_dir, u.value, owner=u.owner, reason=u.reason, force=True)
                for u in due
            ]

    def release(self, owner: str) -> None:
        with self._ctx.lock:
            for key in [k for k, o in self._owned.items() if o.update.owner == owner]:
                del self._owned[key]
