"""The PodMigrationJob controller (Koordinator's MigrationController reconciler): creates a job per move
the descheduler decides, arbitrates the pending ones against the limits (:mod:`.arbitration`), and
carries each through, writing only when a step changes and recording each step as an Event regarding
the job. ``EvictDirectly``: evict the pod, wait until it is gone. ``ReservationFirst``: create the
Reservation (:mod:`.reservations`), wait until koord-scheduler places it on another node, evict the pod,
wait until a new pod is bound to the Reservation and Ready. A job over its TTL fails and releases its
Reservation, as does every other failure after it was created; jobs long past their TTL are deleted.
:meth:`JobController.tick` does one pass (scavenger, arbitration, every job); a step that fails is
retried with backoff. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import copy
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from koord.descheduler.evictor import arbitration, reservations
from koord.descheduler.evictor.args import MigrationControllerArgs
from koord.descheduler.evictor.eviction import go_quote as _q
from koord.descheduler.evictor.eviction import post_eviction
from koord.descheduler.evictor.filters import StaticFilter
from koord.descheduler.evictor.jobapi import JobAPI
from koord.descheduler.evictor.jobview import Overlay
from koord.descheduler.evictor.limits import Limits, Migration
from koord.descheduler.framework.interface import EventRecorder, EvictionRefused, EvictOptions, Obj
from koordshared.apis.core import pod as podutil
from koordshared.apis.core.pod import as_map, condition, condition_true
from koordshared.apis.meta.quantity import format_duration
from koordshared.apis.scheduling import podmigrationjob as pmj
from koordshared.apis.scheduling import reservation as rsv
from koordshared.kube.client import ApiError
from koordshared.kube.ratelimit import TokenBucket
from koordshared.runtime.errors import APIUnavailable, InvalidValue

log = logging.getLogger(__name__)

ACTION = "Migrating"
SCAVENGE_EVERY = 60.0
SCAVENGE_GRACE = 300.0
"""A job is deleted this long after its TTL (Koordinator's scavenger)."""
SCAVENGE_NO_TTL = 1800.0
RETRY_FIRST, RETRY_MAX = 1.0, 60.0


class Stale(Exception):
    """A write was refused because the job changed meanwhile (409): work on it again from the cache."""


@dataclass(frozen=True, slots=True)
class Caches:
    """Where the controller reads: the pods (non-terminated, by ``namespace/name``), the jobs and the
    Reservations (each with the controller's own writes laid over)."""

    pod: Callable[[str], Obj | None]
    jobs: Overlay
    reservations: Overlay


class JobController:
    def __init__(
        self,
        args: MigrationControllerArgs,
        *,
        api: JobAPI,
        caches: Caches,
        limits: Limits,
        static: StaticFilter,
        recorder: EventRecorder,
        wall: Callable[[], float],
        monotonic: Callable[[], float],
        new_name: Callable[[], str] = lambda: str(uuid.uuid4()),
        siblings: list[JobController] | None = None,
    ) -> None:
        self.args = args
        self.api = api
        self.caches = caches
        self.limits = limits
        self.static = static
        self.recorder = recorder
        self.wall = wall
        self.monotonic = monotonic
        self.new_name = new_name
        self.uid = str(uuid.uuid4())
        """This controller's identity, written on the jobs it creates."""
        self.siblings = siblings if siblings is not None else []
        """Every job controller of this process (one per profile), the first taking the jobs none made."""
        self.siblings.append(self)
        self.rate = TokenBucket(args.evict_qps, args.evict_burst, monotonic)
        self._next_scavenge = 0.0
        self._retry: dict[str, tuple[float, float]] = {}
        """Job name -> (when it may be tried again, the delay after the next failure)."""
        self._moving: tuple[tuple[object, ...], dict[str, Obj]] | None = None
        """The active jobs by pod UID (or ``namespace/name`` when they name no UID), with the jobs' stamp."""

    # ---- reading --------------------------------------------------------------------------------------

    def claims(self, job: Obj) -> bool:
        """Whether this controller works on ``job``: its own, or (the first one) a job no controller of
        this process made (a user's, or a previous leader's: continued, not left to the scavenger)."""
        by = str(pmj.annotations_of(job).get(pmj.ANNOTATION_CREATED_BY) or "")
        if by == self.uid:
            return True
        return self.siblings[0] is self and not any(c.uid == by for c in self.siblings)

    def jobs(self) -> list[Obj]:
        return self.caches.jobs.objects()

    def pod_of(self, job: Obj) -> Obj | None:
        """The job's pod while the cache holds it (the same pod: a new one of that name is not it)."""
        key = pmj.pod_key(job)
        pod = self.caches.pod(key) if key else None
        uid = str(pmj.pod_ref(job).get("uid") or "")
        if pod is None or (uid and podutil.pod_uid(pod) != uid):
            return None
        return pod

    def job_of(self, pod: Obj) -> Obj | None:
        """The active job moving ``pod`` (by UID, or by name for a job that names no UID)."""
        stamp = self.caches.jobs.stamp()
        if self._moving is None or self._moving[0] != stamp:
            index: dict[str, Obj] = {}
            for job in self.jobs():
                if pmj.is_active(job):
                    index[str(pmj.pod_ref(job).get("uid") or "") or f"/{pmj.pod_key(job)}"] = job
            self._moving = (stamp, index)
        index = self._moving[1]
        return index.get(podutil.pod_uid(pod)) or index.get(f"/{podutil.pod_key(pod)}")

    def under_way(self, pod: Obj, *, arbitrating: bool) -> list[Migration]:
        return arbitration.under_way(
            self.jobs(), self.pod_of, arbitrating=arbitrating, besides=podutil.pod_uid(pod)
        )

    # ---- creating a job -------------------------------------------------------------------------------

    def create(self, pod: Obj, options: EvictOptions) -> Obj:
        grace = (
            options.grace_period_seconds
            if options.grace_period_seconds is not None
            else self.args.grace_period_seconds
        )
        job = pmj.new_job(
            self.new_name(),
            pod,
            mode=self.args.job_mode,
            ttl=format_duration(self.args.job_ttl) if self.args.job_ttl > 0 else "",
            trigger=options.plugin,
            reason=options.reason,
            created_by=self.uid,
            delete_options={"gracePeriodSeconds": grace} if grace is not None else None,
        )
        try:
            created: Obj = self.api.create_job(job)
        except (ApiError, APIUnavailable) as err:
            log.warning("PodMigrationJob for %s not created: %s", podutil.pod_key(pod), err)
            raise EvictionRefused("error", str(err)) from err
        self.caches.jobs.wrote(created)
        return created

    # ---- the loop -------------------------------------------------------------------------------------

    def tick(self) -> None:
        now = self.monotonic()
        if now >= self._next_scavenge and self.siblings[0] is self:
            self._next_scavenge = now + SCAVENGE_EVERY
            self.scavenge()
        self.arbitrate()
        for job in self.jobs():
            if not pmj.is_active(job) or pmj.paused(job) or not self.claims(job):
                continue
            if pmj.phase_of(job) != pmj.Phase.RUNNING and not pmj.passed_arbitration(job):
                continue
            name = pmj.name_of(job)
            retry = self._retry.get(name)
            if retry is not None and now < retry[0]:
                continue
            try:
                self.reconcile(job)
            except Stale:
                pass
            except (ApiError, APIUnavailable, EvictionRefused) as err:
                delay = retry[1] if retry is not None else RETRY_FIRST
                self._retry[name] = (now + delay, min(delay * 2, RETRY_MAX))
                log.info("PodMigrationJob %s: %s (retried in %gs)", name, err, delay)
            else:
                self._retry.pop(name, None)

    def scavenge(self) -> None:
        """Delete the jobs long past their TTL (and their Reservations), whatever their phase."""
        now = self.wall()
        for job in self.jobs():
            try:
                ttl = pmj.ttl_seconds(job)
            except InvalidValue:
                ttl = 0.0
            limit = ttl + SCAVENGE_GRACE if ttl > 0 else SCAVENGE_NO_TTL
            created = pmj.created_at(job)
            if created is None or now - created < limit:
                continue
            name = pmj.name_of(job)
            try:
                self._delete_reservation(job)
                self.api.delete_job(name)
            except (ApiError, APIUnavailable) as err:
                log.warning("PodMigrationJob %s not scavenged: %s", name, err)
                return
            self.caches.jobs.deleted(name)
            log.info(
                "PodMigrationJob %s deleted (%s past its creation)", name, format_duration(now - created)
            )

    def arbitrate(self) -> None:
        """Koordinator's arbitrator: the pending jobs not yet passed, in order, against the limits."""
        jobs = self.jobs()
        waiting = [
            j
            for j in jobs
            if pmj.phase_of(j) in ("", pmj.Phase.PENDING)
            and not pmj.passed_arbitration(j)
            and not pmj.paused(j)
            and self.claims(j)
        ]
        if not waiting:
            return
        for job in arbitration.sort_queue(waiting, self.pod_of, jobs):
            pod = self.pod_of(job)
            try:
                if pod is not None and self.static.reasons(pod):
                    self._fail(
                        job,
                        pmj.Reason.FORBIDDEN_MIGRATE_POD,
                        f"Pod {_q(podutil.pod_key(pod))} is forbidden to migrate because it does not meet "
                        "the requirements",
                    )
                    continue
                if pod is not None and podutil.EVICT_ANNOTATION not in podutil.annotations_of(pod):
                    result, why = self.limits.refusal(pod, self.under_way(pod, arbitrating=True))
                    if result:
                        log.debug("PodMigrationJob %s waits: %s", pmj.name_of(job), why)
                        continue
                updated = _copy(job)
                updated["metadata"].setdefault("annotations", {})[pmj.ANNOTATION_PASSED_ARBITRATION] = "true"
                self._update(updated)
            except Stale:
                continue
            except (ApiError, APIUnavailable) as err:
                log.warning("PodMigrationJob %s: arbitration not recorded: %s", pmj.name_of(job), err)

    # ---- one job ----------------------------------------------------------------------------------------

    def reconcile(self, job: Obj) -> None:
        if self._timed_out(job):
            return
        if pmj.phase_of(job) != pmj.Phase.RUNNING:
            started = self._start(job)
            if started is None:
                return
            job = started
        pod = self.pod_of(job)
        if (
            pod is not None
            and not condition_true(job, pmj.Condition.EVICTION)
            and podutil.EVICT_ANNOTATION not in podutil.annotations_of(job)
            and self.limits.window_refusal(pod)
        ):
            return  # the workload's window: the job waits (Koordinator requeues it)
        if pmj.mode_of(job, self.args.job_mode) == pmj.Mode.EVICT_DIRECTLY:
            gone = self._evicted(job, None)
            if gone is not None:
                self._finish(gone, f"Pod {_q(pmj.pod_key(job))} has been evicted")
            return
        self._reservation_first(job)

    def _timed_out(self, job: Obj) -> bool:
        try:
            ttl = pmj.ttl_seconds(job)
        except InvalidValue:
            ttl = 0.0
        created = pmj.created_at(job)
        if ttl <= 0 or created is None or self.wall() - created < ttl:
            return False
        self._delete_reservation(job)
        self._fail(job, pmj.Reason.TIMEOUT, "Abort job caused by timeout")
        return True

    def _start(self, job: Obj) -> Obj | None:
        """Pending -> Running, with the pod's UID in ``spec.podRef`` (``None``: the job failed)."""
        key = pmj.pod_key(job)
        if not key:
            self._fail(job, pmj.Reason.INVALID_POD_REF, "Abort job caused by invalid PodRef")
            return None
        pod = self.pod_of(job)
        if pod is None:
            self._fail(job, pmj.Reason.MISSING_POD, f"Abort job caused by missing Pod {_q(key)}")
            return None
        if not pmj.pod_ref(job).get("uid"):
            updated = _copy(job)
            updated["spec"]["podRef"]["uid"] = podutil.pod_uid(pod)
            job = self._update(updated)
        running = _copy(job)
        running.setdefault("status", {})["phase"] = pmj.Phase.RUNNING.value
        return self._write_status(running)

    def _reservation_first(self, job: Obj) -> None:
        ref = pmj.reservation_ref(job)
        if not ref.get("name"):
            self._create_reservation(job)
            return
        job = self._condition(job, pmj.Condition.RESERVATION_CREATED, "True") or job
        r = self.caches.reservations.get(str(ref["name"]))
        if r is None:
            self._fail(
                job,
                pmj.Reason.MISSING_RESERVATION,
                f"Abort job caused by missing Reservation {_q(str(ref['name']))}",
            )
            return
        if not condition_true(job, pmj.Condition.RESERVATION_SCHEDULED):
            message = reservations.unschedulable_message(r)
            if message is not None:
                changed = self._condition(
                    job, pmj.Condition.RESERVATION_SCHEDULED, "False", pmj.Reason.UNSCHEDULABLE, message
                )
                if changed is not None:
                    job = changed
                    self._event(job, "Warning", pmj.Reason.UNSCHEDULABLE, message)
        if reservations.is_waiting(r):
            return  # not placed yet: the TTL ends the wait
        if rsv.is_expired(r):
            self._delete_reservation(job)
            self._fail(job, pmj.Reason.RESERVATION_EXPIRED, "Reservation expired", event=False)
            return
        if not reservations.is_scheduled(r):
            message = reservations.unschedulable_message(r) or ""
            self._delete_reservation(job)
            self._fail(job, pmj.Reason.UNSCHEDULABLE, message, event=False)
            return
        placed = self._placed(job, r)
        if placed is None:
            return
        job = placed
        if reservations.for_pending_pod(r):
            self._wait_scheduled(job, r)
            return
        gone = self._evicted(job, r)
        if gone is None:
            return
        job = gone
        bound = reservations.bound_pod(r)
        if bound is None:
            changed = self._condition(
                job, pmj.Condition.POD_BOUND_RESERVATION, "False", pmj.Reason.WAIT_FOR_POD_BIND_RESERVATION
            )
            if changed is not None:
                self._event(
                    changed,
                    "Normal",
                    pmj.Reason.WAIT_FOR_POD_BIND_RESERVATION,
                    "Waiting for Pod bind Reservation",
                )
            return
        bound_key = f"{bound.get('namespace', '')}/{bound.get('name', '')}"
        if not condition_true(job, pmj.Condition.RESERVATION_BOUND):
            status = pmj.with_condition(
                as_map(job, "status"), pmj.Condition.RESERVATION_BOUND, "True", self.wall()
            ) or dict(as_map(job, "status"))
            status["podRef"] = dict(bound)
            job = self._write_status({**job, "status": status})
            self._event(job, "Normal", "PodBoundReservation", f"Reservation bound by pod {_q(bound_key)}")
        if not condition_true(job, pmj.Condition.BOUND_POD_READY):
            new_pod = self.caches.pod(bound_key)
            if new_pod is not None and not podutil.is_ready(new_pod):
                changed = self._condition(
                    job, pmj.Condition.BOUND_POD_READY, "False", pmj.Reason.WAIT_FOR_BOUND_POD_READY
                )
                if changed is not None:
                    self._event(
                        changed,
                        "Normal",
                        pmj.Reason.WAIT_FOR_BOUND_POD_READY,
                        f"Waiting for Bound Pod {bound_key} Ready",
                    )
                return
            self._event(job, "Normal", "BoundPodReady", f"Bind pod {_q(bound_key)} is ready")
            job = self._condition(job, pmj.Condition.BOUND_POD_READY, "True") or job
        status = pmj.with_condition(
            as_map(job, "status"),
            pmj.Condition.POD_BOUND_RESERVATION,
            "True",
            self.wall(),
            message=f"Bind Pod {_q(bound_key)} in Reservation {_q(rsv.name_of(r))}",
        ) or dict(as_map(job, "status"))
        self._finish(
            {**job, "status": status}, f"Bind Pod {_q(bound_key)} in Reservation {_q(rsv.name_of(r))}"
        )

    def _create_reservation(self, job: Obj) -> None:
        key = pmj.pod_key(job)
        ns, _, name = key.partition("/")
        try:
            pod = self.api.get_pod(ns, name)
        except ApiError as err:
            if err.not_found:
                self._fail(job, pmj.Reason.MISSING_POD, f"Abort job caused by missing Pod {_q(key)}")
                return
            raise
        wanted = reservations.reservation_for(job, pod, int(self.wall() * 1000))
        try:
            created = self.api.create_reservation(wanted)
        except ApiError as err:
            if err.conflict and err.reason == "AlreadyExists":
                created = self.api.get_reservation(wanted["metadata"]["name"])
            else:
                message = f"Failed to create Reservation caused by {err}"
                changed = self._condition(
                    job,
                    pmj.Condition.RESERVATION_CREATED,
                    "False",
                    pmj.Reason.FAILED_CREATE_RESERVATION,
                    message,
                )
                if changed is not None:
                    self._event(changed, "Warning", pmj.Reason.FAILED_CREATE_RESERVATION, message)
                raise
        self.caches.reservations.wrote(created)
        updated = _copy(job)
        options = updated["spec"].setdefault("reservationOptions", {})
        options["reservationRef"] = reservations.reference(created)
        job = self._update(updated)
        self._event(
            job,
            "Normal",
            pmj.Condition.RESERVATION_CREATED,
            f"Successfully create Reservation {_q(rsv.name_of(created))}",
        )

    def _placed(self, job: Obj, r: Obj) -> Obj | None:
        """The job once its Reservation is placed on another node than the pod's (``None``: failed)."""
        node = rsv.node_of(r)
        if as_map(job, "status").get("nodeName") or condition_true(job, pmj.Condition.RESERVATION_SCHEDULED):
            return job
        pod = self.pod_of(job)
        if pod is not None and str(as_map(pod, "spec").get("nodeName") or "") == node:
            self._delete_reservation(job)
            self._fail(
                job,
                pmj.Reason.FORBIDDEN_MIGRATE_POD,
                f"Scheduler assignes the Reservation {_q(rsv.name_of(r))} on the same node as the Pod",
            )
            return None
        status = pmj.with_condition(
            as_map(job, "status"), pmj.Condition.RESERVATION_SCHEDULED, "True", self.wall()
        ) or dict(as_map(job, "status"))
        status["nodeName"] = node
        job = self._write_status({**job, "status": status})
        self._event(
            job,
            "Normal",
            pmj.Condition.RESERVATION_SCHEDULED,
            f"Assigned Reservation {_q(rsv.name_of(r))} to node {_q(node)}",
        )
        return job

    def _wait_scheduled(self, job: Obj, r: Obj) -> None:
        """A pod that was never scheduled: done once the scheduler has placed it."""
        key = pmj.pod_key(job)
        pod = self.pod_of(job)
        if pod is None:
            self._delete_reservation(job)
            self._fail(job, pmj.Reason.MISSING_POD, f"Abort job caused by missing Pod {_q(key)}")
            return
        node = str(as_map(pod, "spec").get("nodeName") or "")
        if not node:
            self._condition(job, pmj.Condition.POD_SCHEDULED, "False", pmj.Reason.UNSCHEDULABLE)
            return
        status = pmj.with_condition(as_map(job, "status"), pmj.Condition.POD_SCHEDULED, "True", self.wall())
        self._finish(
            {**job, "status": status or dict(as_map(job, "status"))},
            f"Assign Pod {_q(key)} to node {_q(node)}",
        )

    def _evicted(self, job: Obj, r: Obj | None) -> Obj | None:
        """Evict the job's pod once; the job once the pod is gone (``None`` until then)."""
        if condition_true(job, pmj.Condition.EVICTION):
            return job
        key = pmj.pod_key(job)
        cond = condition(job, pmj.Condition.EVICTION)
        pod = self.pod_of(job)
        if pod is None:
            if cond is None:  # gone before this job evicted it
                self._delete_reservation(job)
                self._fail(job, pmj.Reason.MISSING_POD, f"Abort job caused by missing Pod {_q(key)}")
                return None
            done = self._condition(job, pmj.Condition.EVICTION, "True", pmj.Reason.EVICT_COMPLETE)
            if done is not None:
                self._event(done, "Normal", pmj.Reason.EVICT_COMPLETE, f"Pod {_q(key)} has been evicted")
            return done or job
        if cond is not None and cond.get("reason") == pmj.Reason.EVICTING:
            return None  # evicted, not gone yet
        if r is not None and rsv.phase_of(r) == rsv.Phase.SUCCEEDED:
            self._delete_reservation(job)
            self._fail(job, pmj.Reason.FORBIDDEN_MIGRATE_POD, "Reservation is already bound by another Pod")
            return None
        if not self.rate.allow():
            raise EvictionRefused("rate", "TooManyEvictions")
        node = str(as_map(pod, "spec").get("nodeName") or "")
        trigger, reason = pmj.trigger_and_reason(job)
        grace = as_map(as_map(job, "spec"), "deleteOptions").get("gracePeriodSeconds")
        if not isinstance(grace, int):
            grace = self.args.grace_period_seconds
        meta = podutil.meta(pod)
        try:
            post_eviction(
                self.api.client,
                str(meta.get("namespace")),
                str(meta.get("name")),
                podutil.pod_uid(pod),
                grace,
            )
        except EvictionRefused as err:
            self._event(job, "Warning", pmj.Reason.EVICTING, f"Failed evict Pod {_q(key)} caused by {err}")
            raise
        self.limits.track_window(pod)
        log.info(
            "evicted %s from %s (%s, PodMigrationJob %s): %s", key, node, trigger, pmj.name_of(job), reason
        )
        self.recorder.event(
            pod,
            "Normal",
            "Descheduled",
            f"Pod evicted from node {_q(node)} by the reason {_q(reason)}",
            action=ACTION,
        )
        message = f"Pod {_q(key)} evicted from node {_q(node)} by the reason {_q(reason)}"
        changed = self._condition(job, pmj.Condition.EVICTION, "False", pmj.Reason.EVICTING, message)
        if changed is not None:
            self._event(changed, "Normal", pmj.Reason.EVICTING, message)
        return None

    # ---- writes ---------------------------------------------------------------------------------------

    def _update(self, job: Mapping[str, Any]) -> Obj:
        return self._wrote(self.api.update_job, job)

    def _write_status(self, job: Mapping[str, Any]) -> Obj:
        return self._wrote(self.api.update_status, job)

    def _wrote(self, write: Callable[[Mapping[str, Any]], Obj], job: Mapping[str, Any]) -> Obj:
        """The job as the server stored it, kept in the cache; a conflict is :class:`Stale`."""
        try:
            answer = write(job)
        except ApiError as err:
            if err.conflict:
                raise Stale() from err
            raise
        self.caches.jobs.wrote(answer)
        return answer

    def _condition(self, job: Obj, kind: str, state: str, reason: str = "", message: str = "") -> Obj | None:
        """Write the condition when it changes (the new job), else ``None``."""
        status = pmj.with_condition(as_map(job, "status"), kind, state, self.wall(), reason, message)
        if status is None:
            return None
        return self._write_status({**job, "status": status})

    def _fail(self, job: Obj, reason: str, message: str, *, event: bool = True) -> None:
        status = dict(as_map(job, "status"))
        status.update(phase=pmj.Phase.FAILED.value, reason=reason, message=message)
        written = self._write_status({**job, "status": status})
        log.info("PodMigrationJob %s failed (%s): %s", pmj.name_of(job), reason, message)
        if event:
            self._event(written, "Warning", reason, message)

    def _finish(self, job: Obj, message: str) -> None:
        status = dict(as_map(job, "status"))
        status.update(phase=pmj.Phase.SUCCEEDED.value, status="Complete", reason="", message=message)
        written = self._write_status({**job, "status": status})
        log.info("PodMigrationJob %s succeeded: %s", pmj.name_of(job), message)
        self._event(written, "Normal", "Complete", message)

    def _delete_reservation(self, job: Obj) -> None:
        name = str(pmj.reservation_ref(job).get("name") or "")
        if name:
            self.api.delete_reservation(name)
            self.caches.reservations.deleted(name)

    def _event(self, job: Obj, type_: str, reason: str, message: str) -> None:
        self.recorder.event(job, type_, str(reason), message, action=ACTION)


def _copy(job: Obj) -> dict[str, Any]:
    return copy.deepcopy(dict(job))
