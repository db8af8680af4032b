"""resctrl writes for the executor: ``schemata`` (cached, compared per cache domain), ``tasks``, groups.

Layer: ``koordlet.resourceexecutor``. Paths and parsing come from ``koordlet.system.resctrl``; the write
itself is ``native.write_schemata``, which returns the kernel's ``info/last_cmd_status`` on failure (resctrl
explains EINVAL only there). ``tasks`` takes one TID per write(2), so only missing TIDs are written. A
:class:`~koordlet.api.ResctrlUpdate` in Koordinator's percent terms becomes the schemata of every cache
domain here (``resctrl.plan_schemata``); making a group mounts resctrl first where it is not mounted.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from koordlet.api import CgroupUpdate, ResctrlUpdate, UpdateResult
from koordlet.api.errors import UnsafePath
from koordlet.resourceexecutor.context import WriteContext
from koordlet.resourceexecutor.metrics import errno_kind
from koordlet.system import native, resctrl
from koordlet.system.files import GONE_ERRNOS, read_text_unless_gone
from koordlet.system.paths import HostPaths
from koordshared.runtime.errors import InvalidValue

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
        self.mounter: Callable[[HostPaths], None] = resctrl.mount
        """``resctrl.mount`` unless a test injects one."""

    def ensure_group(self, group: str, *, owner: str, reason: str = "") -> UpdateResult:
        """Mount resctrl where it is not, then make ``group``; ``written`` when the group was made now."""
        u = CgroupUpdate("group", group, "mkdir", owner, reason, cacheable=False)
        with self._ctx.lock:
            why = resctrl.control_unsupported(self.paths)
            if why is not None:
                return self._ctx.unsupported(u, why)
            if self._ctx.dry_run:
                log.info("dry-run: would make resctrl group %r (owner %s)", group, owner)
                return UpdateResult(u, False, skipped="dry-run")
            try:
                if not resctrl.is_mounted(self.paths):
                    self.mounter(self.paths)
                    self._ctx.audit.record(
                        owner=owner,
                        reason=reason,
                        resource="mount",
                        path=str(self.paths.resctrl_root),
                        before=None,
                        after="resctrl",
                    )
                made = resctrl.make_group(self.paths, group)
            except UnsafePath as err:
                return self._ctx.failed(u, "invalid", f"refused resctrl group {group!r}: {err}")
            except OSError as err:
                return self._ctx.failed(
                    u, errno_kind(err.errno or errno.EIO), f"cannot make resctrl group {group!r}: {err}"
                )
            if not made:
                return UpdateResult(u, False, skipped="unchanged")
            self._ctx.audit.record(
                owner=owner, reason=reason, resource="group", path=group, before=None, after="mkdir"
            )
            return UpdateResult(u, True)

    def remove_group(self, group: str, *, owner: str, reason: str = "") -> UpdateResult:
        """Remove ``group`` (its tasks fall back to the default group) and forget its owned schemata."""
        u = CgroupUpdate("group", group, "rmdir", owner, reason, cacheable=False)
        with self._ctx.lock:
            if self._ctx.dry_run:
                log.info("dry-run: would remove resctrl group %r (owner %s)", group, owner)
                return UpdateResult(u, False, skipped="dry-run")
            try:
                removed = resctrl.remove_group(self.paths, group)
            except UnsafePath as err:
                return self._ctx.failed(u, "invalid", f"refused resctrl group {group!r}: {err}")
            except OSError as err:
                return self._ctx.failed(
                    u, errno_kind(err.errno or errno.EIO), f"cannot remove resctrl group {group!r}: {err}"
                )
            self._owned.pop(str(resctrl.schemata_path(self.paths, group)), None)
            if not removed:
                return UpdateResult(u, False, skipped="gone")
            self._ctx.audit.record(
                owner=owner, reason=reason, resource="group", path=group, before="mkdir", after="rmdir"
            )
            return UpdateResult(u, True)

    def update(self, update: ResctrlUpdate) -> UpdateResult:
        """Koordinator's percent terms for one group, written as the schemata of every cache domain."""
        shown = f"l3 {update.l3_percent} mb {update.mb_percent}"
        u = CgroupUpdate("schemata", update.group, shown, update.owner, update.reason)
        if update.l3_percent is None and update.mb_percent is None:
            return UpdateResult(u, False, skipped="unchanged")
        with self._ctx.lock:
            try:
                planned = resctrl.plan_schemata(self.paths, update.l3_percent, update.mb_percent)
            except InvalidValue as err:
                return self._ctx.failed(u, "invalid", f"refused {shown} for group {update.group!r}: {err}")
            except OSError as err:
                if err.errno in GONE_ERRNOS:
                    return self._ctx.unsupported(u, f"resctrl is not mounted: {err}")
                return self._ctx.failed(u, errno_kind(err.errno or errno.EIO), f"reading resctrl: {err}")
            return self.update_schemata(
                update.group, resctrl.format_schemata(planned), owner=update.owner, reason=update.reason
            )

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
