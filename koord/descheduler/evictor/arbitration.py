"""The order and the limits of PodMigrationJobs (Koordinator's arbitrator): the jobs under way as the
limits count them, and the queue of pending jobs sorted as Koordinator sorts it.

Under way: every active job (Pending or Running) of another pod; while arbitrating, a Pending job counts
only once it has passed arbitration, so the queue is not held back by itself. A job's pod counts for its
node and workload while the cache still holds it (gone, it counts for its namespace and the global
limit only). The queue: newest first, then the pod order of the descheduler (koord priority class,
priority, QoS classes, deletion and eviction cost, newest), then pods of one batch Job side by side, then
batch Jobs with more pods migrating first; each sort stable over the one before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from koord.descheduler.evictor.limits import Migration, workload_of
from koord.descheduler.framework.interface import Obj
from koord.descheduler.plugins.lownodeload.sorter import pod_facts
from koordshared.apis.core import pod as podutil
from koordshared.apis.core.pod import as_map
from koordshared.apis.scheduling import podmigrationjob as pmj

PodOf = Callable[[Obj], Obj | None]


def counts(job: Obj, arbitrating: bool) -> bool:
    """Whether ``job`` counts as a move under way."""
    phase = pmj.phase_of(job)
    if phase == pmj.Phase.RUNNING:
        return True
    return phase in ("", pmj.Phase.PENDING) and (not arbitrating or pmj.passed_arbitration(job))


def under_way(jobs: Sequence[Obj], pod_of: PodOf, *, arbitrating: bool, besides: str = "") -> list[Migration]:
    """The moves under way, as the limits count them, leaving out the pod ``besides`` (a UID)."""
    out = []
    for job in jobs:
        if not counts(job, arbitrating):
            continue
        ref = pmj.pod_ref(job)
        uid = str(ref.get("uid") or "")
        pod = pod_of(job)
        if pod is not None:
            uid = podutil.pod_uid(pod)
        if besides and uid == besides:
            continue
        out.append(
            Migration(
                key=pmj.pod_key(job),
                uid=uid or pmj.uid_of(job),
                node=str(as_map(pod, "spec").get("nodeName") or "") if pod is not None else "",
                namespace=str(ref.get("namespace") or ""),
                workload=workload_of(pod) if pod is not None else "",
                started=0.0,
                round=0,
                dry_run=False,
            )
        )
    return out


def _batch_job_of(pod: Obj | None) -> str:
    ref = podutil.controller_ref(pod) if pod is not None else None
    return str(ref.get("uid") or "") if ref and ref.get("kind") == "Job" else ""


def sort_queue(jobs: Sequence[Obj], pod_of: PodOf, all_jobs: Sequence[Obj]) -> list[Obj]:
    """``jobs`` (pending, not yet arbitrated) in the order they are arbitrated."""
    pods = {pmj.name_of(j): pod_of(j) for j in jobs}
    queue = sorted(jobs, key=lambda j: -(pmj.created_at(j) or 0.0))
    # Jobs whose pod is gone first (they are failed at once), then the descheduler's pod order.
    queue.sort(key=lambda j: (0,) if (p := pods[pmj.name_of(j)]) is None else (1, *_pod_rank(p)))
    first: dict[str, int] = {}
    for i, j in enumerate(queue):
        first.setdefault(_batch_job_of(pods[pmj.name_of(j)]) or f"#{i}", i)
    queue = [
        j
        for _, _, j in sorted(
            (first[_batch_job_of(pods[pmj.name_of(j)]) or f"#{i}"], i, j) for i, j in enumerate(queue)
        )
    ]
    migrating: dict[str, int] = {}
    for j in all_jobs:
        if pmj.phase_of(j) == pmj.Phase.RUNNING or pmj.passed_arbitration(j):
            owner = _batch_job_of(pod_of(j))
            if owner:
                migrating[owner] = migrating.get(owner, 0) + 1
    queue.sort(key=lambda j: -migrating.get(_batch_job_of(pods[pmj.name_of(j)]), 0))
    return queue


def _pod_rank(pod: Obj) -> tuple[float, ...]:
    f = pod_facts(pod)
    return (*f.rank, -f.created)
