"""The hooks' transport without NRI: a reconciler that asks every hook about every pod and container the
states informer lists and writes the answers (Koordinator's ``runtimehooks/reconciler``).
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from koordlet import api
from koordlet.runtimehooks.protocol import (
    ContainerRequest,
    Hook,
    PodRequest,
    Resources,
    Rule,
    Stage,
    request_qos,
)
from koordlet.runtimehooks.writes import ProcessWriter, Update, cgroup_updates
from koordlet.system.podpath import is_container_dir_name

log = logging.getLogger(__name__)

TIERS = (api.KubeQOSClass.GUARANTEED, api.KubeQOSClass.BURSTABLE, api.KubeQOSClass.BESTEFFORT)
RETRY_FIRST, RETRY_MAX = 0.01, 5.0
FULL_EVERY = 30
"""Timed passes between two passes over every pod when a guard watches the pods' values (the others ask
only the pods the guard cannot see and the tiers): a last resort, e.g. for a dir recreated unseen."""


@dataclass(frozen=True, slots=True)
class PassReport:
    """What one pass did."""

    full: bool
    pods: int
    """Pods asked about."""
    written: int
    errors: int
    seconds: float


@dataclass(slots=True)
class _Pending:
    full: bool = True
    verify: set[str] = field(default_factory=set)


class Reconciler:
    def __init__(
        self,
        hooks: Sequence[Hook],
        states: api.StatesReader,
        host: api.HostReader,
        writer: api.ResourceWriter,
        rule: Callable[[], Rule],
        *,
        procs: ProcessWriter | None = None,
        interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        on_pass: Callable[[PassReport], None] | None = None,
        on_hook: Callable[[str, Stage, float, bool], None] | None = None,
        on_managed: Callable[[Mapping[str, tuple[str, ...]]], None] | None = None,
        refresh: Callable[[], object] | None = None,
        guarded: Callable[[], Collection[str]] | None = None,
    ) -> None:
        """``on_managed(dirs by pod uid)`` after each pass: the cgroup dirs holding values the hooks own
        (the guard watches them); ``refresh`` asks the pod source for a new list (a container's cgroup
        appeared that the list does not name yet); ``guarded()``: the pods whose every such dir the guard
        watches now: a timed pass leaves them out unless their inputs changed (the guard asks for a
        pass over a pod someone wrote to)."""
        self.hooks = tuple(hooks)
        self.states = states
        self.host = host
        self.writer = writer
        self.rule = rule
        self.procs = procs
        self.interval = interval
        self._clock = clock
        self._on_pass = on_pass
        self._on_hook = on_hook
        self._on_managed = on_managed
        self._refresh = refresh
        self._guarded = guarded
        self._timed = 0
        self._with_procs: set[str] = set()
        """Pods whose containers get process-level values (new processes need them again: no guard)."""
        self._awaiting: set[str] = set()
        """Pods with a container cgroup the pod list does not name yet (found by the last pass)."""
        self._sandboxes: dict[str, tuple[frozenset[str], list[tuple[api.ContainerInfo, bool]]]] = {}
        """Per pod: its containers' dirs when its sandbox was looked for, and what was found. A sandbox
        lives as long as its containers (the kubelet makes a new one with new containers), so the pod
        dir is listed again only when they change or a write there found it gone: listing a thousand
        pod dirs was most of a full pass."""
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._pending = _Pending()
        self._applied: dict[str, api.PodInfo] = {}
        self._last_rule: Rule | None = None
        self._owned: dict[str, tuple[str, ...]] = {}
        self.passes = 0
        self.unsettled = 0
        """Pods the last pass could not fully write (retried soon)."""

    # -- triggers (any thread) --------------------------------------------------------------------

    def request(self, *, full: bool = False, verify: Iterable[str] = ()) -> None:
        """Ask for a pass: of every pod (``full``), of pods that changed, and of the pods ``verify``
        names with no trust in the executor's cache (their values were changed by someone)."""
        with self._lock:
            self._pending.full |= full
            self._pending.verify.update(verify)
        self._wake.set()

    def pods_changed(self) -> None:
        self.request()

    def rule_changed(self) -> None:
        self.request(full=True)

    # -- loop -------------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Passes on request, every ``interval`` seconds (a full one) and, while some pod could not be
        written (a controller's dir not there yet), again after 0.1 s, doubling up to 5 s."""
        next_full = self._clock()
        backoff = RETRY_FIRST
        retry_at: float | None = None
        while not stop.is_set():
            due = next_full if retry_at is None else min(next_full, retry_at)
            # until due: requests and shutdown() set this Event (stop is not it); a one-second cap only
            # to look at stop was an idle agent's wake-up a second
            self._wake.wait(max(due - self._clock(), 0.0))
            if stop.is_set():
                return
            now = self._clock()
            if not self._wake.is_set() and now < due:
                continue
            self._wake.clear()
            with self._lock:
                pending, self._pending = self._pending, _Pending(full=False)
            timed = now >= next_full
            if timed:
                next_full = now + self.interval
                self._timed += 1
                # with a guard, a timed pass asks only the pods it cannot see (every FULL_EVERY-th: all)
                pending.full |= self._guarded is None or self._timed % FULL_EVERY == 1
            if retry_at is not None and now >= retry_at and self._awaiting and self._refresh is not None:
                self._refresh()  # rate limited by the pod source; a change wakes this loop again anyway
            try:
                self.reconcile(full=pending.full, verify=pending.verify, timed=timed)
            except Exception:
                log.exception("runtime hooks: pass failed")
            if self.unsettled:
                retry_at = self._clock() + backoff
                backoff = min(backoff * 2, RETRY_MAX)
            else:
                retry_at, backoff = None, RETRY_FIRST

    def shutdown(self) -> None:
        self._wake.set()

    # -- one pass ---------------------------------------------------------------------------------

    def reconcile(self, *, full: bool = True, verify: Iterable[str] = (), timed: bool = False) -> PassReport:
        """One pass: every pod (``full``), else the pods whose inputs changed and those ``verify`` names;
        a ``timed`` pass adds the pods the guard does not watch (and the tiers, which it never does)."""
        start = time.perf_counter()
        self._awaiting = set()
        rule = self.rule()
        if rule != self._last_rule:
            full = True
        verify = set(verify)
        unseen: set[str] = set()  # asked again as a full pass would (the executor's cache trusted)
        if timed and not full:
            watched = self._guarded() if self._guarded is not None else ()
            unseen = {uid for uid in self._applied if uid not in watched or uid in self._with_procs}
        pods = [p for p in self.states.pods() if p.is_active and p.cgroup_dir]
        applied = self._applied
        # identity first: an unchanged pod list hands out the same objects (no field-by-field compare)
        todo = [
            p
            for p in pods
            if full or p.uid in verify or p.uid in unseen or ((a := applied.get(p.uid)) is not p and a != p)
        ]
        batch: list[tuple[str, list[Update]]] = []  # (pod uid or "" for tiers, updates)
        if full or timed:
            batch.append(("", self._tier_updates(rule)))
        answers: dict[str, list[tuple[str, Resources]]] = {}
        for pod in todo:
            updates, procs = self._pod_updates(pod, rule, cacheable=pod.uid not in verify)
            batch.append((pod.uid, updates))
            answers[pod.uid] = procs
            if procs:
                self._with_procs.add(pod.uid)
            else:
                self._with_procs.discard(pod.uid)
        levels: list[list[api.CgroupUpdate]] = [[], [], []]
        for _, updates in batch:
            for u in updates:
                levels[u.level].append(u.update)
        results = self.writer.leveled_update(levels) if any(levels) else []
        # by file: a writer may answer a cpuset twice (its widening, then its final value), the last counts
        by_file = {(r.update.resource, r.update.cgroup_dir): r for r in results}
        written = errors = 0
        settled: set[str] = set()
        for uid, updates in batch:
            ok = True
            for u in updates:
                r = by_file.get((u.update.resource, u.update.cgroup_dir))
                if r is None:
                    continue
                written += r.written
                if r.error:
                    errors += 1
                if r.error or r.skipped == "gone":
                    ok = False
                    self._sandboxes.pop(uid, None)  # look at the pod dir again
            if uid:
                if ok and uid not in self._awaiting:
                    settled.add(uid)
                self._owned[uid] = tuple(sorted({u.update.cgroup_dir for u in updates}))
        written_procs, proc_errors = self._process_writes(todo, answers)
        current = {p.uid: p for p in pods}
        if full:
            self._applied = {}
        self._applied = {uid: p for uid, p in self._applied.items() if uid in current}
        for p in todo:
            if p.uid in settled:
                self._applied[p.uid] = p
            else:
                self._applied.pop(p.uid, None)
        self._owned = {uid: dirs for uid, dirs in self._owned.items() if uid in current}
        self._sandboxes = {uid: v for uid, v in self._sandboxes.items() if uid in current}
        self._with_procs &= current.keys()
        self.unsettled = len([p for p in pods if p.uid not in self._applied])
        self._last_rule = rule
        self.passes += 1
        report = PassReport(
            full, len(todo), written + written_procs, errors + proc_errors, time.perf_counter() - start
        )
        if self._on_managed is not None:
            self._on_managed(dict(self._owned))
        if self._on_pass is not None:
            self._on_pass(report)
        return report

    def _ask(self, hook: Hook, stage: Stage, fn: Callable[..., Resources], *args: object) -> Resources:
        t0 = time.perf_counter()
        try:
            answer = fn(*args)
        except Exception:
            log.exception("runtime hook %s failed at %s", hook.name, stage.value)
            if self._on_hook is not None:
                self._on_hook(hook.name, stage, time.perf_counter() - t0, False)
            return Resources()
        if self._on_hook is not None:
            self._on_hook(hook.name, stage, time.perf_counter() - t0, True)
        return answer

    def _tier_updates(self, rule: Rule) -> list[Update]:
        out: list[Update] = []
        for hook in self.hooks:
            tier_fn = getattr(hook, "kube_qos", None)
            if tier_fn is None:
                continue
            for tier in TIERS:
                answer = self._ask(hook, Stage.PRE_RUN_POD_SANDBOX, tier_fn, tier, rule)
                out += cgroup_updates(self.host.qos_cgroup_dir(tier), answer, hook.name, 0, "kube-QoS tier")
        return out

    def _containers(self, pod: api.PodInfo) -> list[tuple[api.ContainerInfo, bool]]:
        known = [(c, False) for c in (*pod.containers, *pod.sidecars) if c.cgroup_dir]
        ids = {c.cgroup_dir for c, _ in known}
        key = frozenset(ids)
        cached = self._sandboxes.get(pod.uid)
        if cached is not None and cached[0] == key:
            return known + cached[1]
        # The sandbox (pause) container: the pod dir's other child that names a container.
        sandbox = [
            (api.ContainerInfo("", d.rsplit("/", 1)[-1], cgroup_dir=d), True)
            for d in self.host.list_cgroups(pod.cgroup_dir, 1)[1:]
            if d not in ids and is_container_dir_name(d.rsplit("/", 1)[-1])
        ]
        if len(sandbox) > 1 and any(not c.container_id for c in pod.containers):
            # A container's cgroup is there but the pod list does not name it yet (the kubelet reports
            # a container's ID a moment after the runtime made it): ask for the list again soon.
            self._awaiting.add(pod.uid)
        found = sandbox[:1] if len(sandbox) == 1 else []
        if known and len(sandbox) <= 1:  # not while a container cgroup could still be the sandbox
            self._sandboxes[pod.uid] = (key, found)
        return known + found

    def _pod_updates(
        self, pod: api.PodInfo, rule: Rule, *, cacheable: bool
    ) -> tuple[list[Update], list[tuple[str, Resources]]]:
        qos = request_qos(pod)
        why = f"pod {pod.namespace}/{pod.name}"
        updates: list[Update] = []
        procs: list[tuple[str, Resources]] = []
        preq = PodRequest(pod, qos)
        for hook in self.hooks:
            answer = self._ask(hook, Stage.PRE_RUN_POD_SANDBOX, hook.pod, preq, rule)
            updates += cgroup_updates(pod.cgroup_dir, answer, hook.name, 1, why, cacheable=cacheable)
        for container, sandbox in self._containers(pod):
            creq = ContainerRequest(pod, qos, container, sandbox)
            for hook in self.hooks:
                answer = self._ask(hook, Stage.PRE_CREATE_CONTAINER, hook.container, creq, rule)
                updates += cgroup_updates(
                    container.cgroup_dir, answer, hook.name, 2, why, cacheable=cacheable
                )
                if answer.oom_score_adj is not None or answer.core_sched_group is not None:
                    procs.append((container.cgroup_dir, answer))
        # a value two hooks answer: the later hook's wins (hooks run in a fixed order)
        last = {(u.update.cgroup_dir, u.update.resource): u for u in updates}
        return [u for u in updates if last[(u.update.cgroup_dir, u.update.resource)] is u], procs

    def _process_writes(
        self, pods: Sequence[api.PodInfo], answers: dict[str, list[tuple[str, Resources]]]
    ) -> tuple[int, int]:
        if self.procs is None:
            return 0, 0
        written = errors = 0
        groups: dict[str, list[str]] = {}
        for pod in pods:
            for cgroup_dir, answer in answers.get(pod.uid, ()):
                if answer.oom_score_adj is not None:
                    r = self.procs.set_oom_score_adj(
                        cgroup_dir, answer.oom_score_adj, owner="OOMScoreAdj", reason=f"pod {pod.name}"
                    )
                    written += r.written
                    errors += bool(r.error)
                if answer.core_sched_group is not None:
                    groups.setdefault(answer.core_sched_group, []).append(cgroup_dir)
        for group, dirs in sorted(groups.items()):
            r = self.procs.share_core_sched_cookie(group, dirs, owner="CoreSched", reason=f"group {group!r}")
            written += r.written
            errors += bool(r.error)
        return written, errors
