"""How many moves may be under way (Koordinator's MigrationController arbitration filters).

With PodMigrationJobs, the moves under way are the active jobs, given by the caller
(:meth:`Limits.refusal`'s ``under_way``). Evicting directly, a pod this evictor evicted counts as
*migrating* from the eviction until it has left the cache (its deletion confirmed) and the round it was
evicted in is over, or ``defaultJobTTL`` has passed: so a round never evicts more than the limit from a
node even when the kubelet confirms deletions at once, and a pod stuck terminating holds its slot for at
most the TTL. Dry-run decisions count for their round only. Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from koord.descheduler.evictor.args import MigrationControllerArgs, max_per_workload
from koord.descheduler.framework.interface import Obj
from koordshared.apis.core import pod as podutil
from koordshared.apis.core.pod import as_map
from koordshared.apis.meta.quantity import parse_time
from koordshared.kube.ratelimit import TokenBucket


@dataclass(slots=True)
class Migration:
    key: str
    uid: str
    node: str
    namespace: str
    workload: str
    started: float
    round: int
    dry_run: bool


def workload_of(pod: Obj) -> str:
    ref = podutil.controller_ref(pod)
    return str(ref.get("uid") or "") if ref else ""


class Limits:
    """Tracks migrating pods and answers whether one more eviction is allowed."""

    def __init__(
        self,
        args: MigrationControllerArgs,
        *,
        get_pod: Callable[[str, str], Obj | None],
        workload_pods: Callable[[str], Sequence[Obj]],
        all_pods: Callable[[], Sequence[Obj]],
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
    ) -> None:
        self.args = args
        self._get_pod = get_pod
        self._workload_pods = workload_pods
        self._all_pods = all_pods
        self._clock = clock
        self._wall = wall_clock
        self.round = 0
        self.migrating: dict[str, Migration] = {}
        self.deleting: dict[str, Migration] = {}
        """Pods the cache shows being deleted at the round's start (not in ``migrating``)."""
        self._windows: dict[str, TokenBucket] = {}
        self._workloads: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self._counts: dict[str, dict[str, int]] = {}
        """Migrating pods per node and per namespace, rebuilt when ``migrating`` changes."""

    def begin_round(self) -> None:
        self.round += 1
        self._workloads.clear()
        self.prune()
        self.deleting = self._deleting()
        self._counts.clear()

    def _deleting(self) -> dict[str, Migration]:
        now = self._wall()
        out: dict[str, Migration] = {}
        for pod in self._all_pods():
            meta = podutil.meta(pod)
            uid = str(meta.get("uid") or "")
            if not podutil.is_terminating(pod) or uid in self.migrating:
                continue
            ends = parse_time(meta.get("deletionTimestamp"))
            if ends is not None and now - ends >= self.args.job_ttl:
                continue  # stuck terminating (a lost node): its slot is freed as a tracked one's is
            out[uid] = _migration(pod, started=self._clock(), round_=self.round, dry_run=False)
        return out

    def _under_way(self) -> list[Migration]:
        return [*self.migrating.values(), *self.deleting.values()]

    def _workload(self, workload: str) -> tuple[frozenset[str], frozenset[str]]:
        """The workload's cached pods and the unavailable ones among them, once per round (a workload
        of thousands of pods is not rescanned for each of its pods)."""
        hit = self._workloads.get(workload)
        if hit is None:
            pods = self._workload_pods(workload)
            hit = self._workloads[workload] = (
                frozenset(podutil.pod_key(p) for p in pods),
                frozenset(podutil.pod_key(p) for p in pods if not _available(p)),
            )
        return hit

    def prune(self) -> None:
        now = self._clock()
        for uid, m in list(self.migrating.items()):
            past = m.round < self.round
            ns, _, name = m.key.partition("/")
            current = self._get_pod(ns, name)
            gone = current is None or str(podutil.meta(current).get("uid") or "") != m.uid
            if (past and (m.dry_run or gone)) or now - m.started >= self.args.job_ttl:
                del self.migrating[uid]
                self._counts.clear()

    def _count(self, field: str, value: str, given: Sequence[Migration] | None) -> int:
        counts = self._counts.get(field) if given is None else None
        if counts is None:
            counts = {}
            for m in self._under_way() if given is None else given:
                key = getattr(m, field)
                counts[key] = counts.get(key, 0) + 1
            if given is None:
                self._counts[field] = counts
        return counts.get(value, 0)

    def refusal(self, pod: Obj, under_way: Sequence[Migration] | None = None) -> tuple[str, str]:
        """``(result, why)`` when moving ``pod`` now would break a limit, else ``("", "")``; ``under_way``
        (the active PodMigrationJobs of other pods) replaces this evictor's own evictions when given."""
        a = self.args
        node = str(as_map(pod, "spec").get("nodeName") or "")
        ns = str(podutil.meta(pod).get("namespace") or "")
        uid = str(podutil.meta(pod).get("uid") or "")
        if uid in self.migrating if under_way is None else any(m.uid == uid for m in under_way):
            return "already-migrating", "the pod is already being moved"
        limit = a.max_migrating_globally if a.gated("MaxMigratingGlobally") else None
        total = len(self.migrating) + len(self.deleting) if under_way is None else len(under_way)
        if limit and total >= limit:
            return "max-migrating-globally", f"{total} pods migrating, maxMigratingGlobally"
        if node and a.max_migrating_per_node and a.gated("MaxMigratingPerNode"):
            n = self._count("node", node, under_way)
            if n >= a.max_migrating_per_node:
                return "max-migrating-per-node", f"{n} pods migrating from {node} (maxMigratingPerNode)"
        if a.max_migrating_per_namespace and a.gated("MaxMigratingPerNamespace"):
            n = self._count("namespace", ns, under_way)
            if n >= a.max_migrating_per_namespace:
                return "max-migrating-per-namespace", f"{n} pods migrating in {ns} (maxMigratingPerNamespace)"
        workload = workload_of(pod)
        return self._workload_refusal(workload, under_way) if workload else ("", "")

    def _workload_refusal(self, workload: str, given: Sequence[Migration] | None) -> tuple[str, str]:
        a = self.args
        keys, not_available = self._workload(workload)
        ways = self._under_way() if given is None else given
        migrating = {m.key for m in ways if m.workload == workload}
        replicas = len(keys | migrating)
        max_migrating = max_per_workload(replicas, a.max_migrating_per_workload)
        max_unavailable = max_per_workload(replicas, a.max_unavailable_per_workload)
        check_replicas = a.gated("ExpectedReplicas") and not a.skip_check_expected_replicas
        if check_replicas and (replicas <= 1 or replicas in (max_migrating, max_unavailable)):
            return "expected-replicas", f"its workload has {replicas} replica(s), limit {max_migrating}"
        if a.gated("MaxMigratingPerWorkload") and migrating and len(migrating) >= max_migrating:
            return (
                "max-migrating-per-workload",
                f"{len(migrating)} of its workload migrating (max {max_migrating})",
            )
        if a.gated("MaxUnavailablePerWorkload"):
            unavailable = migrating | not_available
            if len(unavailable) >= max_unavailable:
                return (
                    "max-unavailable-per-workload",
                    f"{len(unavailable)} of its workload unavailable (max {max_unavailable})",
                )
        bucket = self._windows.get(workload)
        if bucket is not None and bucket.wait_time() > 0:
            return "workload-window", f"its workload was evicted from within {a.workload_window:g}s"
        return "", ""

    def track(self, pod: Obj, dry_run: bool) -> None:
        """Count ``pod`` as migrating (after an eviction, or a dry-run decision)."""
        self.migrating[str(podutil.meta(pod).get("uid") or "")] = _migration(
            pod, started=self._clock(), round_=self.round, dry_run=dry_run
        )
        self._counts.clear()
        if not dry_run:
            self.track_window(pod)

    def track_window(self, pod: Obj) -> None:
        """Take one eviction from the window of ``pod``'s workload (``objectLimiters.workload``)."""
        workload = workload_of(pod)
        a = self.args
        if not workload or a.workload_window <= 0:
            return
        bucket = self._windows.get(workload)
        if bucket is None:
            migrating = {m.key for m in self.migrating.values() if m.workload == workload}
            replicas = len(self._workload(workload)[0] | migrating)
            allowed = max_per_workload(replicas, a.workload_window_max or a.max_migrating_per_workload)
            if allowed <= 0:
                return
            bucket = self._windows[workload] = TokenBucket(
                allowed / a.workload_window, a.workload_window_burst, self._clock
            )
        bucket.allow()

    def window_refusal(self, pod: Obj) -> bool:
        """Whether ``pod``'s workload has used its window (an eviction now would go over it)."""
        bucket = self._windows.get(workload_of(pod))
        return bucket is not None and bucket.wait_time() > 0

    def forget_workloads(self) -> None:
        """Read the workloads' pods afresh at their next use (outside rounds, the cache has moved on)."""
        self._workloads.clear()


def _migration(pod: Obj, *, started: float, round_: int, dry_run: bool) -> Migration:
    meta = podutil.meta(pod)
    return Migration(
        key=podutil.pod_key(pod),
        uid=str(meta.get("uid") or ""),
        node=str(as_map(pod, "spec").get("nodeName") or ""),
        namespace=str(meta.get("namespace") or ""),
        workload=workload_of(pod),
        started=started,
        round=round_,
        dry_run=dry_run,
    )


def _available(pod: Obj) -> bool:
    """``IsPodActive && IsPodReady``."""
    return (
        as_map(pod, "status").get("phase") not in ("Succeeded", "Failed")
        and not podutil.is_terminating(pod)
        and podutil.is_ready(pod)
    )
