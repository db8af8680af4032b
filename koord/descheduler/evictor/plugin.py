"""``MigrationController``, the default Evict and Filter plugin: Koordinator's name and args (so a
Koordinator DeschedulerConfiguration keeps working). As in Koordinator, each move is a PodMigrationJob
carried out by :mod:`.jobs` when the cluster serves the CRD (``filter`` then also turns away pods already
being moved and, for ReservationFirst, pods not placed by ``schedulerNames``); without the CRD, or with
``usePodMigrationJobs: false``, the pod is evicted at once through the Eviction API. Either way the
static filters (:mod:`.filters`) and the limits (:mod:`.limits`) are checked again in ``evict``; an
eviction waits for the ``evictQPS`` rate; a 429 (a PodDisruptionBudget) is a refusal, never forced; each
eviction is logged with its reason and recorded as a ``Descheduled`` Event (action ``Migrating``)
regarding the pod; a dry run logs the same decisions and changes nothing. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from koord.descheduler.evictor.args import MigrationControllerArgs, parse_args
from koord.descheduler.evictor.eviction import go_quote, post_eviction
from koord.descheduler.evictor.filters import StaticFilter
from koord.descheduler.evictor.jobapi import JobAPI
from koord.descheduler.evictor.jobs import Caches, JobController
from koord.descheduler.evictor.jobview import Overlay
from koord.descheduler.evictor.limits import Limits, Migration
from koord.descheduler.framework.interface import EvictionRefused, EvictOptions, Handle, Obj
from koord.descheduler.framework.nodefit import NodeFit
from koordshared.apis.core import pod as podutil
from koordshared.apis.core.node import is_ready
from koordshared.apis.core.pod import as_map
from koordshared.apis.meta import groups
from koordshared.apis.scheduling import podmigrationjob as pmj
from koordshared.kube.client import ApiError, request
from koordshared.kube.informers import Watch, list_call
from koordshared.kube.ratelimit import TokenBucket
from koordshared.runtime.errors import APIUnavailable

log = logging.getLogger(__name__)

NAME = "MigrationController"
REQUEST_TIMEOUT = 5.0
BLOCK_ALL_PRIORITIES = -(2**31)


class MigrationController:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Handle) -> None:
        self.args: MigrationControllerArgs = parse_args(args)
        self.handle = handle
        self.limits = Limits(
            self.args,
            get_pod=handle.get_pod,
            workload_pods=lambda uid: handle.informers.pods.by_index("owner", uid),
            all_pods=handle.informers.pods.objects,
            clock=handle.monotonic,
            wall_clock=handle.now,
        )
        self.static = StaticFilter(
            self.args,
            priority_threshold=self._priority_threshold,
            nodes=lambda: [n for n in handle.informers.nodes.objects() if is_ready(n)],
            node_fit=self._node_fit,
        )
        self.rate = TokenBucket(self.args.evict_qps, self.args.evict_burst, handle.monotonic)
        self._fit: NodeFit | None = None
        self._threshold: int | None = self.args.priority_threshold_value
        self._told: set[str] = set()
        """The limits that held a pod back this round, each said once at info."""
        self._lock = threading.RLock()
        """The rounds and the job controller's loop share the limits and the job caches."""
        self.jobs: JobController | None = None
        self._stores: tuple[Any, ...] = ()
        self._jobs_decided = not (self.args.use_jobs and handle.client is not None)
        """Whether it is known yet if moves go through jobs (the cluster's API is asked once)."""
        if not self._jobs_decided:
            self._decide_jobs()

    # ---- helpers ---------------------------------------------------------------------------------------

    def _node_fit(self) -> NodeFit:
        if self._fit is None:
            self._fit = NodeFit(self.handle.pods_on_node)
        return self._fit

    def _decide_jobs(self) -> None:
        """Use PodMigrationJobs if the cluster serves them (else evict directly, said once)."""
        path = f"/apis/{groups.SCHEDULING_GROUP}/{groups.POD_MIGRATION_JOBS.version}"
        try:
            found = request(
                self.handle.client, "discover scheduling.koordinator.sh", "GET", path, timeout=REQUEST_TIMEOUT
            )
            served = {str(r.get("name")) for r in found.get("resources") or () if isinstance(r, Mapping)}
        except ApiError as err:
            if not err.not_found:
                log.warning("MigrationController: %s; asked again later", err)
                return
            served = set()
        except (APIUnavailable, AttributeError, TypeError) as err:
            log.warning("MigrationController: discovery failed (%s); asked again later", err)
            return
        self._jobs_decided = True
        if groups.POD_MIGRATION_JOBS.plural not in served:
            log.error(
                "MigrationController: the cluster does not serve %s (apply the PodMigrationJob CRD of "
                "deploy/descheduler/crds): evicting directly, without PodMigrationJobs",
                groups.POD_MIGRATION_JOBS.plural,
            )
            return
        if self.args.job_mode == pmj.Mode.RESERVATION_FIRST and groups.RESERVATIONS.plural not in served:
            log.error(
                "MigrationController: defaultJobMode ReservationFirst but the cluster does not serve "
                "reservations (apply koord-scheduler's Reservation CRD): its jobs will fail"
            )
        informers = self.handle.informers
        caches: list[Any] = []
        for res in (groups.POD_MIGRATION_JOBS, groups.RESERVATIONS):
            if res.plural in served:  # a cache of what is not served would never sync
                fn, kwargs = list_call(self.handle.client, Watch(res.plural, res))
                caches.append(informers.shared(res.plural, fn, kwargs))
            else:
                caches.append(None)
        self._stores = tuple(c for c in caches if c is not None)
        self.jobs = JobController(
            self.args,
            api=JobAPI(self.handle.client),
            caches=Caches(
                pod=informers.pods.get,
                jobs=Overlay(lambda: caches[0]),
                reservations=Overlay(lambda: caches[1]),
            ),
            limits=self.limits,
            static=self.static,
            recorder=self.handle.recorder,
            wall=self.handle.now,
            monotonic=self.handle.monotonic,
            siblings=self.handle.shared.setdefault(f"{NAME}/controllers", []),
        )
        log.info(
            "MigrationController: moves go through PodMigrationJobs (defaultJobMode %s)", self.args.job_mode
        )

    def _jobs_ready(self) -> JobController | None:
        """The job controller once its caches are synced; ``EvictionRefused`` until then."""
        if not self._jobs_decided:
            self._decide_jobs()
            if not self._jobs_decided:
                raise EvictionRefused(
                    "not-ready", "whether the cluster serves PodMigrationJobs is not known yet"
                )
        if self.jobs is not None and not all(s.has_synced() for s in self._stores):
            raise EvictionRefused("not-ready", "the PodMigrationJob caches are not synced yet")
        return self.jobs

    def background(self) -> tuple[float, Callable[[], None]] | None:
        """The job controller's loop (interval and tick), when moves may go through jobs."""
        if not self.args.use_jobs or self.handle.client is None:
            return None
        return self.args.arbitration_interval, self.tick

    def tick(self) -> None:
        with self._lock:
            try:
                jobs = self._jobs_ready()
            except EvictionRefused:
                return
            if jobs is not None:
                self.limits.forget_workloads()
                jobs.tick()

    def _under_way(self, pod: Obj, jobs: JobController) -> list[Migration]:
        """The moves the limits count: the active jobs of other pods, and this round's dry-run picks."""
        dry = [m for m in self.limits.migrating.values() if m.dry_run and m.uid != podutil.pod_uid(pod)]
        return [*jobs.under_way(pod, arbitrating=False), *dry]

    def _job_refusal(self, pod: Obj, jobs: JobController) -> tuple[str, str]:
        """Why ``pod`` may not get a job (Koordinator's Filter beyond the static filters)."""
        if jobs.job_of(pod) is not None or podutil.pod_uid(pod) in self.limits.migrating:
            return "already-migrating", "a PodMigrationJob is moving the pod"
        scheduler = str(as_map(pod, "spec").get("schedulerName") or "default-scheduler")
        if self.args.job_mode == pmj.Mode.RESERVATION_FIRST and scheduler not in self.args.scheduler_names:
            return (
                "scheduler-name",
                f"ReservationFirst needs the pod placed by {', '.join(sorted(self.args.scheduler_names))}, "
                f"not {scheduler}",
            )
        return "", ""

    def _priority_threshold(self) -> int | None:
        name = self.args.priority_threshold_name
        if self._threshold is None and name:
            try:
                pc = request(
                    self.handle.client,
                    f"get priorityclass {name}",
                    "GET",
                    f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}",
                    timeout=REQUEST_TIMEOUT,
                )
                self._threshold = int(pc["value"])
            except (ApiError, APIUnavailable, KeyError, TypeError, ValueError) as err:
                log.error("priorityThreshold.name %s: %s; no pod with a priority is evicted", name, err)
                return BLOCK_ALL_PRIORITIES
        return self._threshold

    def begin_round(self) -> None:
        with self._lock:
            self._fit = None
            self._told.clear()
            self.limits.begin_round()

    # ---- the plugin ------------------------------------------------------------------------------------

    def filter(self, pod: Obj) -> bool:
        reasons = self.static.reasons(pod)
        if not reasons and self.jobs is not None:
            with self._lock:
                why = self._job_refusal(pod, self.jobs)[1]
            reasons = [why] if why else []
        if reasons:
            log.debug("%s is not evictable: %s", podutil.pod_key(pod), "; ".join(reasons))
        return not reasons

    def pre_eviction_filter(self, pod: Obj) -> bool:
        with self._lock:
            jobs = self.jobs
            under_way = self._under_way(pod, jobs) if jobs is not None else None
            result, why = self.limits.refusal(pod, under_way)
        if result:
            level = logging.DEBUG if result in self._told else logging.INFO
            self._told.add(result)
            log.log(level, "not evicting %s now (%s): %s", podutil.pod_key(pod), result, why)
        return not result

    def evict(self, pod: Obj, options: EvictOptions) -> bool:
        key = podutil.pod_key(pod)
        reasons = self.static.reasons(pod)
        if reasons:
            raise EvictionRefused("filtered", f"{key}: {'; '.join(reasons)}")
        with self._lock:
            jobs = self._jobs_ready() if self.args.use_jobs and self.handle.client is not None else None
            if jobs is not None:
                return self._create_job(pod, options, jobs)
        return self._evict_now(pod, options)

    def _create_job(self, pod: Obj, options: EvictOptions, jobs: JobController) -> bool:
        key = podutil.pod_key(pod)
        node = str(as_map(pod, "spec").get("nodeName") or "")
        result, why = self._job_refusal(pod, jobs)
        if not result:
            result, why = self.limits.refusal(pod, self._under_way(pod, jobs))
        if result:
            log.info("not moving %s from %s: %s", key, node, why)
            raise EvictionRefused(result, why)
        if options.dry_run or self.args.dry_run:
            self.limits.track(pod, dry_run=True)
            log.info(
                "dry run: would create a PodMigrationJob for %s on %s (%s): %s",
                key,
                node,
                options.plugin,
                options.reason,
            )
            return True
        job = jobs.create(pod, options)
        log.info(
            "PodMigrationJob %s created to move %s from %s (%s): %s",
            pmj.name_of(job),
            key,
            node,
            options.plugin,
            options.reason,
        )
        return True

    def _evict_now(self, pod: Obj, options: EvictOptions) -> bool:
        key = podutil.pod_key(pod)
        node = str(as_map(pod, "spec").get("nodeName") or "")
        result, why = self.limits.refusal(pod)
        if result:
            log.info("not evicting %s from %s: %s", key, node, why)
            raise EvictionRefused(result, why)
        dry_run = options.dry_run or self.args.dry_run
        if dry_run:
            self.limits.track(pod, dry_run=True)
            log.info("dry run: would evict %s from %s (%s): %s", key, node, options.plugin, options.reason)
            return True
        delay = self.rate.wait_time()
        while delay > 0:
            if self.handle.wait(delay):
                raise EvictionRefused("stopping", "the descheduler is stopping")
            delay = self.rate.wait_time()
        self.rate.allow()
        self._post_eviction(pod, options)
        self.limits.track(pod, dry_run=False)
        log.info("evicted %s from %s (%s): %s", key, node, options.plugin, options.reason)
        self.handle.recorder.event(
            pod,
            "Normal",
            "Descheduled",
            f"Pod evicted from node {go_quote(node)} by the reason {go_quote(options.reason)}",
            action="Migrating",
        )
        return True

    def _post_eviction(self, pod: Obj, options: EvictOptions) -> None:
        meta = podutil.meta(pod)
        grace = (
            options.grace_period_seconds
            if options.grace_period_seconds is not None
            else self.args.grace_period_seconds
        )
        post_eviction(
            self.handle.client,
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
            str(meta.get("uid") or ""),
            grace,
        )
