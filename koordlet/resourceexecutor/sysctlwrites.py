"""Writes of kernel tunables (``/proc/sys``, ``/sys``) for the executor, with the original kept for restore.

Layer: ``koordlet.resourceexecutor``. Same guarantees as cgroup writes: validated before anything is read
or written (``koordlet.system.sysctl``), skipped when the kernel already holds the value, cached and
re-applied every force period while owned, audited, dry-run aware, failures classified by errno. Each
write is read back: a kernel that silently clamps a value is reported, not believed. The value found
before an owner's first write is remembered, and :meth:`SysctlWrites.restore` puts it back.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from koordlet.api import CgroupUpdate, UpdateResult
from koordlet.api.errors import ResourceUnsupported
from koordlet.resourceexecutor.context import WriteContext
from koordlet.resourceexecutor.metrics import errno_kind
from koordlet.system import sysctl
from koordlet.system.paths import HostPaths
from koordshared.runtime.errors import InvalidValue

log = logging.getLogger(__name__)

Writer = Callable[[Sequence[tuple[str | Path, str | bytes]]], list[int]]


@dataclass(slots=True)
class _Owned:
    update: CgroupUpdate
    checked: float
    original: str
    """What the kernel held before the first write (for a flag list, that flag's ``X``/``NO_X``)."""


def _key(name: str, value: str) -> str:
    return f"{name}#{sysctl.flag_name(value)}" if sysctl.get_sysctl(name).flag_list else name


class SysctlWrites:
    """Owned by a ``ResourceExecutor``; shares its :class:`WriteContext` and writer."""

    def __init__(self, paths: HostPaths, ctx: WriteContext, *, writer: Writer) -> None:
        self.paths = paths
        self._ctx = ctx
        self._writer = writer
        self._owned: dict[str, _Owned] = {}

    def update(
        self, name: str, value: str, *, owner: str, reason: str = "", force: bool = False
    ) -> UpdateResult:
        """Make ``name`` hold ``value`` (for ``sched_features``: set one flag, ``X`` or ``NO_X``)."""
        u = CgroupUpdate(name, "", value, owner, reason)
        with self._ctx.lock:
            try:
                norm = sysctl.validate(name, value)
            except ResourceUnsupported as err:
                return self._ctx.unsupported(u, str(err))
            except InvalidValue as err:
                return self._ctx.failed(u, "invalid", f"refused before writing: {err}")
            return self._apply(CgroupUpdate(name, "", norm, owner, reason), force=force)

    def _apply(self, u: CgroupUpdate, *, force: bool) -> UpdateResult:
        name, norm = u.resource, u.value
        path = sysctl.get_sysctl(name).path(self.paths)
        key = _key(name, norm)
        now = self._ctx.clock()
        owned = self._owned.get(key)
        fresh = owned is not None and now - owned.checked < self._ctx.force_seconds
        if not force and fresh and owned is not None and owned.update.value == norm:
            return UpdateResult(u, False, skipped="unchanged")
        try:
            current = sysctl.read(self.paths, name)
        except OSError as err:
            return self._ctx.failed(u, errno_kind(err.errno), f"read {path} failed: {err}")
        if current is None:
            return self._ctx.unsupported(u, f"{path} does not exist on this kernel")
        original = owned.original if owned is not None else _state(name, current, norm)
        if sysctl.same(name, current, norm):
            self._owned[key] = _Owned(u, now, original)
            return UpdateResult(u, False, skipped="unchanged")
        if self._ctx.dry_run:
            log.info(
                "dry-run: would write %r to %s (was %r; owner %s: %s)", norm, path, current, u.owner, u.reason
            )
            return UpdateResult(u, False, skipped="dry-run")
        err_no = self._writer([(path, norm)])[0]
        if err_no:
            return self._ctx.failed(
                u,
                errno_kind(err_no),
                f"write {norm!r} to {path} failed: [errno {err_no}] {os.strerror(err_no)}",
            )
        after = sysctl.read(self.paths, name)
        if not sysctl.same(name, after, norm):
            return self._ctx.failed(u, "clamped", f"wrote {norm!r} to {path} but the kernel kept {after!r}")
        self._ctx.audit.record(
            owner=u.owner,
            reason=u.reason,
            resource=name,
            path=str(path),
            before=_state(name, current, norm),
            after=norm,
        )
        self._owned[key] = _Owned(u, now, original)
        return UpdateResult(u, True)

    def restore(
        self, owner: str, reason: str = "restore", names: Collection[str] | None = None
    ) -> list[UpdateResult]:
        """Write back what ``owner`` found (of the tunables ``names`` only, if given), then forget those
        values: the plugin's shutdown, or a setting its policy no longer asks for."""
        with self._ctx.lock:
            mine = {
                k: o
                for k, o in self._owned.items()
                if o.update.owner == owner and (names is None or o.update.resource in names)
            }
            # The original is the kernel's own value, so Koordinator's policy range (which it may lie
            # outside of, e.g. a small min_free_kbytes) does not apply; it is still a well-formed token.
            results = [
                self._apply(CgroupUpdate(o.update.resource, "", o.original, owner, reason), force=True)
                if _well_formed(o.update.resource, o.original)
                else self._ctx.failed(o.update, "invalid", f"original {o.original!r} is not restorable")
                for o in mine.values()
            ]
            for key in mine:
                self._owned.pop(key, None)
            return results

    def reconcile_owned(self) -> list[UpdateResult]:
        """Re-apply owned values last checked a force period ago (repairs out-of-band changes)."""
        with self._ctx.lock:
            now = self._ctx.clock()
            due = [o.update for o in self._owned.values() if now - o.checked >= self._ctx.force_seconds]
            return [
                self.update(u.resource, u.value, owner=u.owner, reason=u.reason or "force", force=True)
                for u in due
            ]

    def release(self, owner: str) -> None:
        with self._ctx.lock:
            for key in [k for k, o in self._owned.items() if o.update.owner == owner]:
                del self._owned[key]


def _state(name: str, current: str, value: str) -> str:
    """What ``current`` says about what ``value`` sets: the whole value, or one flag's state."""
    if sysctl.get_sysctl(name).flag_list:
        return sysctl.flag_state(current, value) or value
    return current


def _well_formed(name: str, value: str) -> bool:
    if sysctl.get_sysctl(name).flag_list:
        return bool(value.strip()) and " " not in value.strip()
    return value.strip().lstrip("-").isdecimal()
