"""Writes to the processes of a cgroup: ``/proc/<pid>/oom_score_adj`` (OOMScoreAdj) and core-scheduling
cookies (CoreSched), audited and counted like every other write of the executor.

A PID read from ``cgroup.procs`` may exit and be reused before it is written to, so each process is pinned
first (a ``/proc/<pid>`` directory fd: operations through it fail once that process is gone, whatever the
PID now names) and the cgroup's list is read again: only processes still listed there are written.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from collections.abc import Iterator, Sequence

from koordlet.api import CgroupUpdate, UpdateResult
from koordlet.api.errors import KoordletError
from koordlet.resourceexecutor.context import WriteContext
from koordlet.resourceexecutor.metrics import errno_kind
from koordlet.system import cgroups, files
from koordlet.system.cgroups import CgroupMode
from koordlet.system.coresched import SchedCore
from koordlet.system.paths import HostPaths

log = logging.getLogger(__name__)

OOM_SCORE_ADJ = "oom_score_adj"
CORE_SCHED_COOKIE = "core_sched_cookie"
OOM_MIN, OOM_MAX = -1000, 1000


class ProcWrites:
    def __init__(
        self, paths: HostPaths, mode: CgroupMode, ctx: WriteContext, sched_core: SchedCore | None = None
    ) -> None:
        self.paths = paths
        self.mode = mode
        self.ctx = ctx
        self.sched_core = sched_core
        """``None`` where the kernel has no core scheduling: cookie writes are skipped as unsupported."""
        self._leaders: dict[str, int] = {}

    def _pids(self, cgroup_dir: str) -> list[int] | None:
        """The processes of ``cgroup_dir`` (``None`` when the cgroup is gone)."""
        path = cgroups.resource_path(self.paths, self.mode, "cgroup.procs", cgroup_dir, for_read=True)
        raw = files.read_text_unless_gone(path)
        if raw is None:
            return None
        return [int(t) for t in raw.split() if t.isdecimal()]

    @contextlib.contextmanager
    def _pinned(self, cgroup_dir: str) -> Iterator[dict[int, int] | None]:
        """``pid -> /proc/<pid> dir fd`` of the cgroup's processes still in it once pinned."""
        first = self._pids(cgroup_dir)
        fds: dict[int, int] = {}
        try:
            if first is None:
                yield None
                return
            for pid in first:
                with contextlib.suppress(OSError):
                    fds[pid] = os.open(self.paths.proc(str(pid)), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            still = set(self._pids(cgroup_dir) or ())
            yield {pid: fd for pid, fd in fds.items() if pid in still}
        finally:
            for fd in fds.values():
                os.close(fd)

    def set_oom_score_adj(self, cgroup_dir: str, value: int, *, owner: str, reason: str = "") -> UpdateResult:
        """Give every process of ``cgroup_dir`` this ``oom_score_adj``; ``written`` when one changed."""
        u = CgroupUpdate(OOM_SCORE_ADJ, cgroup_dir, str(value), owner, reason, cacheable=False)
        if isinstance(value, bool) or not OOM_MIN <= value <= OOM_MAX:
            return self.ctx.failed(
                u, "invalid", f"refused oom_score_adj {value}: outside [{OOM_MIN}, {OOM_MAX}]"
            )
        changed = failed = 0
        try:
            pinned_cm = self._pinned(cgroup_dir)
            with self.ctx.lock, pinned_cm as pinned:
                if pinned is None:
                    return UpdateResult(u, False, skipped="gone")
                for pid, fd in pinned.items():
                    try:
                        old = _read_at(fd, OOM_SCORE_ADJ)
                        if old == str(value):
                            continue
                        if self.ctx.dry_run:
                            log.info("dry-run: would set oom_score_adj of %d to %d (was %s)", pid, value, old)
                            continue
                        _write_at(fd, OOM_SCORE_ADJ, str(value))
                    except OSError as err:
                        if err.errno not in (errno.ESRCH, errno.ENOENT):
                            failed += 1
                            self.ctx.metrics.count_error(OOM_SCORE_ADJ, errno_kind(err.errno))
                        continue
                    changed += 1
                    self.ctx.audit.record(
                        owner=owner,
                        reason=reason,
                        resource=OOM_SCORE_ADJ,
                        path=str(self.paths.proc(str(pid), OOM_SCORE_ADJ)),
                        before=old,
                        after=str(value),
                        phase="final",
                    )
        except (OSError, KoordletError) as err:
            return self.ctx.failed(u, "error", f"oom_score_adj for {cgroup_dir}: {err}")
        if failed:
            return self.ctx.failed(
                u, "error", f"oom_score_adj {value} not written to {failed} process(es) of {cgroup_dir}"
            )
        return UpdateResult(u, changed > 0, skipped="" if changed else "unchanged")

    def share_core_sched_cookie(
        self, group: str, cgroup_dirs: Sequence[str], *, owner: str, reason: str = ""
    ) -> UpdateResult:
        """One cookie for every process of ``cgroup_dirs`` (core-sched ``group``): the group's cookie
        holder lends it (the one remembered, else the first process with a cookie), else the first process
        gets a new cookie; the others take it. The sharing passes through the calling thread, which ends up
        holding the cookie too: callers keep it a thread of its own."""
        u = CgroupUpdate(CORE_SCHED_COOKIE, ",".join(cgroup_dirs), group, owner, reason, cacheable=False)
        ops = self.sched_core
        if ops is None:
            return UpdateResult(u, False, skipped="unsupported")
        with self.ctx.lock, contextlib.ExitStack() as stack:
            pinned: dict[int, int] = {}
            for d in cgroup_dirs:
                got: dict[int, int] | None = stack.enter_context(self._pinned(d))
                pinned.update(got or {})
            if not pinned:
                return UpdateResult(u, False, skipped="gone")
            if self.ctx.dry_run:
                log.info("dry-run: would share one core-sched cookie among %d process(es)", len(pinned))
                return UpdateResult(u, False, skipped="dry-run")
            try:
                leader, created = self._leader(group, ops, sorted(pinned))
                want = ops.get(leader)
                moved = [pid for pid in pinned if pid != leader and ops.get(pid) != want]
                if moved:
                    ops.share_from(leader)
                    for pid in moved:
                        ops.share_to(pid)
            except OSError as err:
                self._leaders.pop(group, None)
                return self.ctx.failed(u, errno_kind(err.errno or 0), f"core-sched group {group!r}: {err}")
            if not moved and not created:
                return UpdateResult(u, False, skipped="unchanged")
            self.ctx.audit.record(
                owner=owner,
                reason=reason,
                resource=CORE_SCHED_COOKIE,
                path=u.cgroup_dir,
                before="",
                after=f"group {group!r}: cookie of {leader} shared with {len(moved)} process(es)",
                phase="final",
            )
            return UpdateResult(u, True)

    def _leader(self, group: str, ops: SchedCore, pids: Sequence[int]) -> tuple[int, bool]:
        """The process whose cookie the group shares, and whether its cookie was made now."""
        known = self._leaders.get(group)
        if known is not None:
            try:
                if ops.get(known):
                    return known, False
            except OSError:
                pass  # it exited: pick another
        for pid in pids:
            if ops.get(pid):
                self._leaders[group] = pid
                return pid, False
        ops.create(pids[0])
        self._leaders[group] = pids[0]
        return pids[0], True


def _read_at(dir_fd: int, name: str) -> str:
    fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        return os.read(fd, 64).decode().strip()
    finally:
        os.close(fd)


def _write_at(dir_fd: int, name: str, text: str) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
