"""The resource executor (koordlet's ``ResourceUpdateExecutor``): the one path for cgroup writes.

Layer: ``koordlet.resourceexecutor``; uses ``koordlet.system`` only. Every update is validated before any
write (a refused value never reaches the kernel), skipped when unchanged (cache keyed by absolute path,
values compared as the kernel means them), written unbuffered with the result checked, audited, and
re-applied every ``force_update_seconds`` by :meth:`ResourceExecutor.reconcile_owned` to repair
out-of-band changes. :meth:`leveled_update` orders hierarchical writes so cgroup v1 never refuses them.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from prometheus_client import CollectorRegistry

from koordlet.api import CgroupUpdate, NetQoSSpec, ResctrlUpdate, UpdateResult
from koordlet.api.errors import ResourceUnsupported, UnsafePath
from koordlet.resourceexecutor import values
from koordlet.resourceexecutor.audit import AuditLog
from koordlet.resourceexecutor.config import ExecutorConfig
from koordlet.resourceexecutor.context import WriteContext
from koordlet.resourceexecutor.metrics import ExecutorMetrics, errno_kind
from koordlet.resourceexecutor.procwrites import ProcWrites
from koordlet.resourceexecutor.resctrlwrites import ResctrlWrites
from koordlet.resourceexecutor.sysctlwrites import SysctlWrites
from koordlet.resourceexecutor.tcwrites import TCWrites
from koordlet.system import cgroups, files, native, topology
from koordlet.system.cgroups import CgroupMode
from koordlet.system.paths import HostPaths
from koordshared.runtime.errors import InvalidValue

log = logging.getLogger(__name__)

Writer = Callable[[Sequence[tuple[str | Path, str | bytes]]], list[int]]
"""Ordered writes, per-item 0 or errno (``native.write_batch``'s shape)."""


@dataclass(frozen=True, slots=True)
class Target:
    """A validated update and the absolute path of its file."""

    update: CgroupUpdate
    value: str
    """Normalized value with v1 semantics (what ``cgroups.validate`` returned)."""
    path: Path


@dataclass(slots=True)
class _Entry:
    target: Target
    checked: float


class ResourceExecutor:
    """Implements ``koordlet.api.ResourceWriter``; thread-safe (one lock around every update)."""

    def __init__(
        self,
        paths: HostPaths,
        *,
        config: ExecutorConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        registry: CollectorRegistry | None = None,
        mode: CgroupMode | None = None,
        online_cpus: Callable[[], frozenset[int] | None] | None = None,
        writer: Writer | None = None,
    ) -> None:
        self.paths = paths
        self.config = config or ExecutorConfig()
        self.mode = mode if mode is not None else cgroups.detect_mode(paths)
        self._clock = clock
        self._online = online_cpus or self._read_online_cpus
        self._writer: Writer = writer or functools.partial(
            native.write_batch, force_python=self.config.force_python
        )
        self._cache: dict[str, _Entry] = {}
        self._lock = threading.RLock()
        self.audit = AuditLog(self.config.audit_size, wall_clock=wall_clock)
        self.metrics = ExecutorMetrics(registry if registry is not None else CollectorRegistry())
        self.context = WriteContext(
            clock, self.audit, self.metrics, self._lock, self.config.force_update_seconds, self.config.dry_run
        )
        self.resctrl = ResctrlWrites(paths, self.context, force_python=self.config.force_python)
        """resctrl ``schemata``/``tasks`` writes, sharing this executor's cache period, audit and metrics."""
        self.sysctl = SysctlWrites(paths, self.context, writer=self._writer)
        """``/proc/sys`` and ``/sys`` tunables (koordlet's ``SystemResource``), restorable per owner."""
        self.tc = TCWrites(self.context, netns=self.config.netns)
        """Network QoS: tc state per uplink (HTB classes, pod filters, IFB ingress), applied by difference."""
        self.procs = ProcWrites(paths, self.mode, self.context)
        """The processes of a cgroup: ``oom_score_adj`` and core-scheduling cookies (runtime hooks)."""

    # -- public API (koordlet.api.ResourceWriter) -------------------------------------------------------

    def update(self, update: CgroupUpdate) -> UpdateResult:
        return self.update_batch([update])[0]

    def update_batch(self, updates: Sequence[CgroupUpdate]) -> list[UpdateResult]:
        """Apply in order; a refused, failed or vanished item does not stop the rest."""
        with self._lock:
            online = self._online_for(updates)
            results: list[UpdateResult] = []
            for u in updates:
                start = time.perf_counter()
                target = self._target(u, online)
                res = target if isinstance(target, UpdateResult) else self._apply(target, force=False)
                self._observe(res, start)
                results.append(res)
            return results

    def leveled_update(self, levels: Sequence[Sequence[CgroupUpdate]]) -> list[UpdateResult]:
        """Levels are ``[qos, pods, containers]``; results come flat, in input order.

        Pass 1 goes top-down writing ``merge(current, new)`` (cpu union, larger limit) where that
        loosens; pass 2 goes bottom-up writing the final values. Growth thus reaches parents before
        children and shrink reaches children before parents: v1 refuses a child wider than its parent
        (cpuset EACCES, cfs quota EINVAL) and a parent narrower than a child (cpuset EBUSY).
        """
        with self._lock:
            return self._leveled(levels, self._online_for(*levels), force=False)

    def release(self, owner: str) -> None:
        """Stop caching and re-applying ``owner``'s values (its plugin restored them or is gone)."""
        with self._lock:
            for key in [k for k, e in self._cache.items() if e.target.update.owner == owner]:
                del self._cache[key]
            self.resctrl.release(owner)
            self.sysctl.release(owner)
            self.tc.release(owner)

    # Other write kinds of the contract: each delegates to its own module, which shares this executor's
    # lock, cache period, audit log, metrics and dry run through the WriteContext.

    def update_sysctl(self, name: str, value: str, *, owner: str, reason: str = "") -> UpdateResult:
        return self.sysctl.update(name, value, owner=owner, reason=reason)

    def restore_sysctl(self, owner: str, names: Sequence[str] | None = None) -> list[UpdateResult]:
        return self.sysctl.restore(owner, names=names)

    def ensure_resctrl_group(self, group: str, *, owner: str, reason: str = "") -> UpdateResult:
        return self.resctrl.ensure_group(group, owner=owner, reason=reason)

    def update_resctrl(self, update: ResctrlUpdate) -> UpdateResult:
        return self.resctrl.update(update)

    def move_resctrl_tasks(
        self, group: str, tids: Sequence[int], *, owner: str, reason: str = ""
    ) -> UpdateResult:
        return self.resctrl.update_tasks(group, tids, owner=owner, reason=reason)

    def remove_resctrl_group(self, group: str, *, owner: str, reason: str = "") -> UpdateResult:
        return self.resctrl.remove_group(group, owner=owner, reason=reason)

    def apply_network_qos(self, spec: NetQoSSpec, *, owner: str, reason: str = "") -> UpdateResult:
        return self.tc.apply(spec, owner=owner, reason=reason)

    def remove_network_qos(self, uplink: str, *, owner: str, reason: str = "") -> UpdateResult:
        return self.tc.remove(uplink, owner=owner, reason=reason)

    def reconcile_owned(self) -> list[UpdateResult]:
        """Re-check owned values older than the force period and rewrite any changed out of band.

        The daemon calls this every few seconds; repairs go through the leveled path (grouped by
        cgroup depth) so restoring a hierarchy cannot trip v1's ordering rules.
        """
        with self._lock:
            now = self._clock()
            period = self.config.force_update_seconds
            due: dict[int, list[CgroupUpdate]] = {}
            for key, entry in list(self._cache.items()):
                age = now - entry.checked
                u = entry.target.update
                if not u.owner:
                    if age >= self.config.unowned_ttl_seconds:
                        del self._cache[key]
                    continue
                if age >= period:
                    depth = len([p for p in u.cgroup_dir.split("/") if p])
                    due.setdefault(depth, []).append(replace(u, value=entry.target.value))
            repaired = (
                self.resctrl.reconcile_owned() + self.sysctl.reconcile_owned() + self.tc.reconcile_owned()
            )
            if not due:
                return repaired
            levels = [due[d] for d in sorted(due)]
            online = self._online_for(*levels)
            return self._leveled(levels, online, force=True) + repaired

    def events(self, *, since_seq: int = 0, limit: int | None = None) -> list[dict[str, object]]:
        """Recent audit events as JSON-able dicts (``/events``)."""
        return self.audit.events(since_seq=since_seq, limit=limit)

    # -- steps ----------------------------------------------------------------------------------------

    def _online_for(self, *batches: Sequence[CgroupUpdate]) -> frozenset[int] | None:
        # Only cpu lists are checked against the online CPUs: reading them for every batch of other
        # values cost a sysfs read per cfs_burst_us update at 1000 pods.
        wanted = any(u.resource == "cpuset.cpus" for batch in batches for u in batch)
        return self._online() if wanted else None

    def _read_online_cpus(self) -> frozenset[int] | None:
        try:
            return topology.read_online_cpus(self.paths)
        except (OSError, InvalidValue):
            return None

    def _target(self, u: CgroupUpdate, online: frozenset[int] | None) -> Target | UpdateResult:
        try:
            path = cgroups.resource_path(self.paths, self.mode, u.resource, u.cgroup_dir)
        except ResourceUnsupported as err:
            return self.context.unsupported(u, str(err))
        except UnsafePath as err:
            return self.context.failed(u, "unsafe", f"refused {u.value!r} for {u.resource}: {err}")
        try:
            value = cgroups.validate(u.resource, u.value, online_cpus=online)
        except InvalidValue as err:
            return self.context.failed(u, "invalid", f"refused before writing {path}: {err}")
        return Target(u, value, path)

    def _cached_unchanged(self, t: Target, now: float) -> bool:
        entry = self._cache.get(_key(t))
        return (
            entry is not None
            and values.same(t.update.resource, entry.target.value, t.value)
            and now - entry.checked < self.config.force_update_seconds
        )

    def _remember(self, t: Target, now: float) -> None:
        # The cache says what the file holds: an uncached write (another owner's restore) must also drop
        # the entry, or the cached owner's next identical value is skipped and the file keeps the other one.
        if t.update.cacheable:
            self._cache[_key(t)] = _Entry(t, now)
        else:
            self._cache.pop(_key(t), None)

    def _current(self, t: Target) -> tuple[str | None, str | None] | UpdateResult:
        """``(raw, v1 value)`` now in the file (value ``None`` if unparsable), or a gone/error result."""
        try:
            raw = files.read_text_unless_gone(t.path)
        except OSError as err:
            return self.context.failed(t.update, errno_kind(err.errno), f"read {t.path} failed: {err}")
        if raw is None:
            if t.path.parent.is_dir():
                # the cgroup is there but this kernel lacks the file (an Anolis-only knob)
                return self.context.unsupported(t.update, f"{t.path.name} does not exist in {t.path.parent}")
            return self._gone(t)
        try:
            return raw, cgroups.from_kernel(t.update.resource, self.mode, raw)
        except InvalidValue:
            return raw, None

    def _apply(self, t: Target, *, force: bool, phase: str = "final") -> UpdateResult:
        u = t.update
        now = self._clock()
        if u.resource in values.APPEND_ONLY:
            return self._append(t)
        if u.cacheable and not force and self._cached_unchanged(t, now):
            return UpdateResult(u, False, skipped="unchanged")
        cur = self._current(t)
        if isinstance(cur, UpdateResult):
            return cur
        raw, current = cur
        if values.holds(u.resource, self.mode, t.value, current, raw):
            self._remember(t, now)
            return UpdateResult(u, False, skipped="unchanged")
        res = self._write(t, t.value, raw, current, phase)
        if res.written:
            self._remember(t, now)
        return res

    def _append(self, t: Target) -> UpdateResult:
        """``tasks``/``cgroup.procs``: write the id only if it is not already listed (never cached)."""
        cur = self._current(t)
        if isinstance(cur, UpdateResult):
            return cur
        raw, _ = cur
        if t.value in (raw or "").split():
            return UpdateResult(t.update, False, skipped="unchanged")
        return self._write(t, t.value, None, None, "final")

    def _write(self, t: Target, value: str, raw: str | None, current: str | None, phase: str) -> UpdateResult:
        u = t.update
        try:
            file_name, text = cgroups.to_kernel(u.resource, self.mode, value, raw)
        except InvalidValue as err:
            return self.context.failed(u, "invalid", f"refused before writing {t.path}: {err}")
        path = t.path.with_name(file_name)
        why = values.guard_kernel_text(u.resource, file_name, text)
        if why is not None:
            return self.context.failed(u, "invalid", f"refused write {text!r} to {path}: {why}")
        if self.config.dry_run:
            log.info(
                "dry-run: would write %r to %s (was %r; owner %s: %s)", text, path, current, u.owner, u.reason
            )
            return UpdateResult(u, False, skipped="dry-run")
        err_no = self._writer([(path, text)])[0]
        if err_no == 0:
            self.audit.record(
                owner=u.owner,
                reason=u.reason,
                resource=u.resource,
                path=str(path),
                before=current if current is not None else raw,
                after=text,
                phase=phase,
            )
            log.debug("wrote %r to %s (was %r; owner %s, %s)", text, path, current, u.owner, phase)
            return UpdateResult(u, True)
        if err_no in files.GONE_ERRNOS and (err_no != errno.ESRCH or u.resource in values.APPEND_ONLY):
            # ESRCH from cgroup.procs/tasks: the process to move exited meanwhile, as good as gone; from
            # any other file it would be a kernel surprise, reported as a failure
            return self._gone(t)
        return self.context.failed(
            u, errno_kind(err_no), f"write {text!r} to {path} failed: [errno {err_no}] {os.strerror(err_no)}"
        )

    def _gone(self, t: Target) -> UpdateResult:
        self._cache.pop(_key(t), None)
        log.debug("skip %s: %s is gone", t.update.resource, t.path)
        self.metrics.count_error(t.update.resource, "gone")
        return UpdateResult(t.update, False, skipped="gone")

    def _observe(self, res: UpdateResult, start: float) -> None:
        status = "error" if res.error else ("written" if res.written else res.skipped or "unchanged")
        self.metrics.observe(res.update.resource, status, (time.perf_counter() - start) * 1000.0)

    def _leveled(
        self, levels: Sequence[Sequence[CgroupUpdate]], online: frozenset[int] | None, *, force: bool
    ) -> list[UpdateResult]:
        results: list[UpdateResult | None] = []
        spent: list[float] = []
        pending: list[tuple[int, Target, bool]] = []
        final_phase = "force" if force else "final"
        for level in levels:
            for u in level:
                idx = len(results)
                start = time.perf_counter()
                results.append(self._merge_pass(u, online, force=force, pending=pending, idx=idx))
                spent.append(time.perf_counter() - start)
        for idx, t, merged in reversed(pending):
            start = time.perf_counter()
            res = self._apply(t, force=True, phase=final_phase)
            if merged and res.skipped == "unchanged":
                res = UpdateResult(t.update, True)  # the merge already was the final value
            results[idx] = res
            spent[idx] += time.perf_counter() - start
        out: list[UpdateResult] = []
        for maybe, secs in zip(results, spent, strict=True):
            assert maybe is not None
            self._observe(maybe, time.perf_counter() - secs)
            out.append(maybe)
        return out

    def _merge_pass(
        self,
        u: CgroupUpdate,
        online: frozenset[int] | None,
        *,
        force: bool,
        pending: list[tuple[int, Target, bool]],
        idx: int,
    ) -> UpdateResult | None:
        """Pass 1 for one update: a result if it is done, else ``None`` and an entry in ``pending``."""
        target = self._target(u, online)
        if isinstance(target, UpdateResult):
            return target
        if u.resource not in values.MERGEABLE:
            return self._apply(target, force=force, phase="force" if force else "final")
        now = self._clock()
        if u.cacheable and not force and self._cached_unchanged(target, now):
            return UpdateResult(u, False, skipped="unchanged")
        cur = self._current(target)
        if isinstance(cur, UpdateResult):
            return cur
        raw, current = cur
        if values.holds(u.resource, self.mode, target.value, current, raw):
            self._remember(target, now)
            return UpdateResult(u, False, skipped="unchanged")
        wrote = False
        if current is not None:
            merged = values.merge(u.resource, current, target.value)
            if merged is not None and not values.same(u.resource, merged, current):
                res = self._write(target, merged, raw, current, "merge")
                if res.error or res.skipped == "gone":
                    return res
                wrote = res.written
        pending.append((idx, target, wrote))
        return None


def _key(t: Target) -> str:
    return values.cache_key(t.update.resource, str(t.path), t.value)
