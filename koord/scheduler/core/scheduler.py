"""koord-scheduler's engine (kube-scheduler's ``Scheduler``, ``scheduler.go`` and ``schedule_one.go``): the
profiles, the cache and its snapshot, the queue, the waiting pods, the binding threads, and the loop that
schedules one pod at a time.

Informer events feed it (:mod:`.eventhandlers`); :meth:`Scheduler.run` loops until stopped. A scheduling
cycle (:meth:`Scheduler.schedule_one`) is serial: PreFilter, Filter from a rotating start node until enough
feasible nodes are found, PostFilter when none is, Score, pick the best, assume, Reserve, Permit; the
binding cycle then runs on another thread. Failures go back to the queue with a ``FailedScheduling``
Event and the ``PodScheduled=False`` condition; a pod deleted or bound meanwhile is dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from koord.scheduler.cache.cache import Cache
from koord.scheduler.core.api import ClusterAPI
from koord.scheduler.core.handle import SchedulerHandle
from koord.scheduler.core.metrics import SchedulerMetrics
from koord.scheduler.core.reporter import StatusReporter
from koord.scheduler.framework.events import ASSIGNED_POD_DELETE, ClusterEventWithHint
from koord.scheduler.framework.extension import FailureHooks
from koord.scheduler.framework.filterresult import fit_message
from koord.scheduler.framework.interface import Code, CycleState, Status
from koord.scheduler.framework.nominator import Nominator, nominated_node_name
from koord.scheduler.framework.runtime import (
    NARROWED_BY,
    Framework,
    PluginFailure,
    call,
    go_list,
    select_host,
    weighted_total,
)
from koord.scheduler.framework.snapshot import NodeSet, Snapshot
from koord.scheduler.framework.types import Obj, PodInfo, PreFilterResult
from koord.scheduler.framework.waiting import WaitingPod, WaitingPods
from koord.scheduler.queue.podinfo import QueuedPodInfo
from koord.scheduler.queue.queue import SchedulingQueue

log = logging.getLogger(__name__)

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
PLUGIN_METRICS_SAMPLE_PERCENT = 10
"""The share of cycles whose plugin calls are timed (kube-scheduler's ``pluginMetricsSamplePercent``)."""


@dataclass(frozen=True, slots=True)
class SchedulingOptions:
    percentage_of_nodes_to_score: int | None = None
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    parallelism: int = 16
    """Binding threads (kube-scheduler's ``parallelism`` sizes its worker pools)."""
    pop_from_backoff: bool = True
    """While activeQ is empty, take pods from backoffQ without waiting out their backoff (kube-scheduler's
    ``SchedulerPopFromBackoffQ``)."""
    plugin_metrics_sample_percent: int = PLUGIN_METRICS_SAMPLE_PERCENT


def node_gone(node: str) -> Status:
    return Status(Code.UNSCHEDULABLE, (f"node {node} was deleted while the pod was being bound",))


def scheduler_name(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("schedulerName") or "default-scheduler")


def sampled(cycle: int, percent: int) -> bool:
    """Whether scheduling cycle ``cycle`` (from 1) times its plugin calls: ``percent`` of the cycles,
    evenly (kube-scheduler draws them at random; every n-th here, the first included, so a short run
    is timed too)."""
    return ((cycle - 1) * percent) % 100 < percent


def num_feasible_nodes_to_find(percentage: int | None, num_all: int) -> int:
    """kube-scheduler's ``numFeasibleNodesToFind``: every node below 100; else the given percentage, or
    the adaptive one (``50 - nodes/125``, at least 5 %), and at least 100 nodes."""
    if num_all < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all
    pct = percentage or 0
    if pct >= 100:
        return num_all
    if pct == 0:
        pct = max(50 - num_all // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all * pct // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass
class Diagnosis:
    """Why a pod fits no node (kube-scheduler's ``framework.Diagnosis``): the statuses the cycle gathered,
    the PreFilter rejection, the PostFilter (preemption) message, and the plugins that rejected the pod
    (they decide which cluster events requeue it)."""

    statuses: dict[str, Status] = field(default_factory=dict)
    """Node -> why it failed (every node searched)."""
    pre_filter: Status | None = None
    """The PreFilter rejection, when PreFilter failed the pod on every node."""
    post_filter_message: str = ""
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)

    def record(self, statuses: Mapping[str, Status]) -> None:
        self.statuses.update(statuses)
        for st in statuses.values():
            self._plugin(st)

    def _plugin(self, st: Status) -> None:
        if not st.plugin:
            return
        if st.code is Code.PENDING:
            self.pending_plugins.add(st.plugin)
        else:
            self.unschedulable_plugins.add(st.plugin)

    def reject_all(self, st: Status, nodes: int) -> None:
        self.pre_filter = st
        self._plugin(st)


class FitError(Exception):
    """No node fits the pod; ``str()`` is the operator's message."""

    def __init__(self, pod_key: str, num_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__(pod_key)
        self.pod_key = pod_key
        self.num_nodes = num_nodes
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        d = self.diagnosis
        return fit_message(
            self.num_nodes, d.statuses, pre_filter=d.pre_filter, post_filter=d.post_filter_message
        )


class Scheduler:
    def __init__(
        self,
        profiles: Mapping[str, Framework],
        api: ClusterAPI,
        metrics: SchedulerMetrics,
        *,
        cache: Cache,
        snapshot: Snapshot,
        waiting: WaitingPods,
        pods: Any,
        options: SchedulingOptions = SchedulingOptions(),
        hooks: FailureHooks | None = None,
        seed: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not profiles:
            raise ValueError("at least one profile")
        self.profiles = dict(profiles)
        self.api = api
        self.metrics = metrics
        self.cache = cache
        self.snapshot = snapshot
        self.waiting = waiting
        self.pods = pods
        """The pods informer cache (``namespace/name`` keys): the truth about a pod's current state."""
        self.virtual_pods: dict[str, Obj] = {}
        """Pods that exist only in the scheduler (reserve pods), by key: their truth (fed by the handle)."""
        self.config = options
        self.hooks = hooks or FailureHooks()
        self.rng = np.random.default_rng(seed)
        self._clock = clock
        self.next_start_node_index = 0
        first = next(iter(self.profiles.values()))
        hints = {name: fw.events_to_register() for name, fw in self.profiles.items()}
        self.queue = SchedulingQueue(
            first.less,
            self._pre_enqueue,
            lambda pod: hints.get(scheduler_name(pod), {}),
            initial_backoff=options.pod_initial_backoff_seconds,
            max_backoff=options.pod_max_backoff_seconds,
            clock=clock,
            pop_from_backoff=options.pop_from_backoff,
        )
        self._binders = ThreadPoolExecutor(max_workers=max(options.parallelism, 1), thread_name_prefix="bind")
        self.reporter = StatusReporter(api)
        self._idle = threading.Condition()
        self._binding = 0
        self._stopped = False
        self.cycle_lock = threading.Lock()
        """Held for each scheduling cycle: whatever reads the snapshot or runs plugins beside the loop
        (``/debug/explain``) takes it."""
        self.nominator = Nominator()
        """Pending pods nominated to nodes (by preemption): the cycle keeps their room for them."""
        for fw in self.profiles.values():
            fw.nominator = self.nominator
            if isinstance(fw.handle, SchedulerHandle):
                fw.handle.attach(self)
        metrics.bind_queue(self.queue.counts)
        metrics.bind_cache(cache.counts)
        metrics.bind_unschedulable(lambda: self.queue.unschedulable_by_plugin(scheduler_name))

    # ---- profiles --------------------------------------------------------------------------------

    def framework_for(self, pod: Obj) -> Framework | None:
        return self.profiles.get(scheduler_name(pod))

    def responsible_for(self, pod: Obj) -> bool:
        return scheduler_name(pod) in self.profiles

    def _pre_enqueue(self, pod: Obj) -> Status | None:
        fw = self.framework_for(pod)
        if fw is None:
            return Status.unresolvable(f"no profile named {scheduler_name(pod)}")
        try:
            return fw.run_pre_enqueue(pod)
        except PluginFailure as err:
            log.warning("%s", err)
            return Status(Code.ERROR, (str(err),), err.plugin)

    def events(self) -> dict[str, dict[str, tuple[ClusterEventWithHint, ...]]]:
        return {name: fw.events_to_register() for name, fw in self.profiles.items()}

    # ---- the loop -------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Schedule pods until ``stop`` (one pod at a time; bindings run beside)."""
        flusher = threading.Thread(target=self.queue.run, args=(stop,), name="queue-flush", daemon=True)
        flusher.start()
        while not stop.is_set():
            self.schedule_next(timeout=0.5)

    def schedule_next(self, timeout: float | None = 0.5) -> bool:
        """One scheduling cycle if a pod is ready within ``timeout``; whether there was one. A pod that
        breaks the cycle in an unexpected way is logged and sent back with an error, never stops the loop."""
        qpi = self._next_from_plugins() or self.queue.pop(timeout)
        if qpi is None:
            return False
        try:
            with self.cycle_lock:
                self.schedule_one(qpi)
        except Exception as err:
            log.exception("scheduling %s failed unexpectedly", qpi.info.key)
            fw = self.framework_for(qpi.pod)
            if fw is not None:
                self.failure(
                    fw,
                    qpi,
                    Status(Code.ERROR, (f"internal error: {err!r}",)),
                    time.perf_counter(),
                    error=True,
                )
        return True

    # ---- the scheduling cycle ------------------------------------------------------------------------------

    def schedule_one(self, qpi: QueuedPodInfo) -> None:
        """One pod's scheduling cycle; failures go back to the queue through ``self.failure``."""
        start = time.perf_counter()
        pod = qpi.pod
        fw = self.framework_for(pod)
        if fw is None or self.skip(qpi):
            self.queue.done(qpi.uid)
            return
        state = CycleState(qpi.info)
        state.record_plugin_metrics = sampled(qpi.popped_cycle, self.config.plugin_metrics_sample_percent)
        # The rows a plugin overlaid last cycle stay until BeforePreFilter has overlaid again (the same copy
        # costs no write); schedule_pod settles the rest before any plugin reads the snapshot.
        self.cache.update_snapshot(self.snapshot, hold=True)
        try:
            node = self.schedule_pod(fw, state, qpi)
        except FitError as fit:
            nominated: str | None = None
            if fw.has("postFilter") and fit.num_nodes:
                try:
                    result, post = fw.run_post_filter(state, pod, self._post_filter_statuses(fit))
                except PluginFailure as err:
                    self.failure(fw, qpi, err, start, error=True)
                    return
                if not post.is_success:
                    fit.diagnosis.post_filter_message = post.message
                nominated = result.nominated_node_name if result is not None else None
            fw.extensions.after_post_filter(state, pod, fit.diagnosis.statuses)
            self.failure(fw, qpi, fit, start, nominated=nominated)
            return
        except PluginFailure as err:
            self.failure(fw, qpi, err, start, error=True)
            return
        self.cache.assume_pod(qpi.info, node)
        self.nominator.delete(qpi.uid)
        reserved = fw.run_reserve(state, pod, node)
        if reserved is not None:
            self.forget(qpi)
            self.failure(fw, qpi, reserved, start, error=reserved.code is Code.ERROR)
            return
        st: Status | None
        try:
            st, waits = fw.run_permit(state, pod, node)
        except PluginFailure as err:
            st, waits = Status(Code.ERROR, (str(err),), err.plugin), {}
        if st is not None and st.code is not Code.WAIT:
            fw.run_unreserve(state, pod, node)
            self.forget(qpi)
            self.failure(fw, qpi, st, start, error=st.code is Code.ERROR)
            return
        self.queue.done(qpi.uid)
        if waits:
            self.wait_on_permit(fw, state, qpi, node, waits, start, st.reasons if st is not None else ())
        else:
            self.submit_binding(fw, state, qpi, node, start)

    def schedule_pod(self, fw: Framework, state: CycleState, qpi: QueuedPodInfo) -> str:
        """The node for the pod, or :class:`FitError` (no node fits) / :class:`PluginFailure` (an error)."""
        pod = qpi.pod
        snapshot = self.snapshot
        ext = fw.extensions
        if not ext.pre_filter or not len(snapshot):
            snapshot.settle()
        total = len(snapshot)
        diagnosis = Diagnosis()
        if total == 0:
            diagnosis.reject_all(Status.unresolvable("no nodes available to schedule pods"), 0)
            raise FitError(qpi.info.key, 0, diagnosis)
        if ext.pre_filter:
            try:
                pod, rejected = ext.before_pre_filter(state, pod)
            finally:
                snapshot.settle()
            if rejected is not None:
                if rejected.code is Code.ERROR:
                    raise PluginFailure(rejected.plugin, "beforePreFilter", rejected.message)
                diagnosis.reject_all(rejected, total)
                raise FitError(qpi.info.key, total, diagnosis)
        result, rejected = fw.run_pre_filter(state, pod)
        if rejected is None and ext.pre_filter:
            rejected = ext.after_pre_filter(state, pod, result)
        if rejected is None and ext.prefer_nodes is not None:
            result, rejected = self._preferred(fw, state, pod, result)
        if rejected is not None:
            if not rejected.is_rejected:
                raise PluginFailure(rejected.plugin, "preFilter", rejected.message or rejected.code.name)
            diagnosis.reject_all(rejected, total)
            raise FitError(qpi.info.key, total, diagnosis)
        allowed = None if result is None else result.node_names
        nominated = nominated_node_name(pod)
        if nominated and (allowed is None or nominated in allowed):
            info = snapshot.node_info(nominated)
            if info is not None and fw.filter_one(state, pod, info) is None:
                return nominated
        nodes = snapshot.rotated(self.next_start_node_index)
        if allowed is not None:
            nodes = nodes.subset(_allowed_mask(nodes, allowed))
        percentage = fw.profile.percentage_of_nodes_to_score
        if percentage is None:
            percentage = self.config.percentage_of_nodes_to_score
        want = num_feasible_nodes_to_find(percentage, len(nodes)) if fw.has("score") else 1
        found = fw.find_feasible(state, pod, nodes, want)
        if total:
            self.next_start_node_index = (self.next_start_node_index + found.processed) % total
        feasible = found.feasible
        if not len(feasible):
            diagnosis.record(found.statuses())
            if allowed is not None:
                outside = total - len(nodes)
                if outside:
                    # kube-scheduler's status for the nodes a PreFilter result left out (findNodesThatFitPod).
                    by = state.get(NARROWED_BY) or ()
                    diagnosis.unschedulable_plugins.update(by)
                    text = f"node(s) didn't satisfy plugin(s) {go_list(by)}"
                    why = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (text,))
                    for ni in snapshot.node_infos():
                        if ni.name not in allowed:
                            diagnosis.statuses[ni.name] = why
            raise FitError(qpi.info.key, total, diagnosis)
        if len(feasible) == 1:
            return feasible.info(0).name
        if ext.score:
            pod, transformed, _ = ext.before_score(state, pod, feasible)
            feasible = transformed if isinstance(transformed, NodeSet) else NodeSet.of(snapshot, transformed)
        fw.run_pre_score(state, pod, feasible)
        scores = fw.plugin_scores(state, pod, feasible)
        totals = weighted_total(scores, len(feasible))
        return feasible.info(select_host(feasible, totals, self.rng)).name

    def _preferred(
        self, fw: Framework, state: CycleState, pod: Obj, result: PreFilterResult | None
    ) -> tuple[PreFilterResult | None, Status | None]:
        """Koordinator's ``RunPreferNodesPlugin``: the first preferred node that passes every filter (after
        the BeforeFilter transformers, with the pods nominated there) becomes the only candidate."""
        plugin = fw.extensions.prefer_nodes
        assert plugin is not None
        answer = call(plugin.name, "preferNodes", plugin.prefer_nodes, state, pod, result)
        if isinstance(answer, Status):
            passed = answer.code is Code.SKIP or answer.is_success
            return result, None if passed else answer.with_plugin(plugin.name)
        for name in answer:
            info = self.snapshot.node_info(name)
            if info is None:
                continue
            p, ni, _ = fw.extensions.before_filter(state, pod, info)
            if fw.filter_one(state, p, ni) is None:
                return PreFilterResult(frozenset((name,))), None
        return result, None

    def _post_filter_statuses(self, fit: FitError) -> Mapping[str, Status]:
        """Why each node failed, as PostFilter reads it: a PreFilter rejection counts on every node (a node
        without a status failed unresolvably)."""
        rejected = fit.diagnosis.pre_filter
        if rejected is None:
            return fit.diagnosis.statuses
        return {ni.name: rejected for ni in self.snapshot.node_infos()}

    def _next_from_plugins(self) -> QueuedPodInfo | None:
        """The pod a NextPod plugin names (Koordinator's ``runNextPodPlugin``), taken out of the queue; a
        pod the queue cannot give up is skipped and the plugin asked again."""
        for fw in self.profiles.values():
            for plugin in fw.extensions.next_pod:
                while True:
                    try:
                        pod = plugin.next_pod()
                    except Exception:
                        log.exception("plugin %s: NextPod failed", plugin.name)
                        break
                    if pod is None:
                        break
                    qpi = self.queue.take(PodInfo.uid_of(pod), plugin.name)
                    if qpi is not None:
                        return qpi
        return None

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until no binding cycle is running or queued (tests, benchmarks); False on timeout."""
        with self._idle:
            # Once stopped, bindings not started were dropped and will never finish.
            return self._idle.wait_for(lambda: self._binding == 0 or self._stopped, timeout)

    def _submit(self, fn: Callable[..., None], *args: Any) -> None:
        with self._idle:
            self._binding += 1

        def run() -> None:
            try:
                fn(*args)
            finally:
                with self._idle:
                    self._binding -= 1
                    self._idle.notify_all()

        try:
            self._binders.submit(run)
        except RuntimeError:  # shut down: a cycle or a Permit that ended while stopping
            with self._idle:
                self._binding -= 1
                self._idle.notify_all()
            if not self._stopped:
                raise

    def stop(self) -> None:
        """No more cycles; bindings not started are dropped (the process is stopping, and the writes of
        those under way are the API's to fence and drain: :class:`~.api.FencedAPI`), so a plugin stuck
        in PreBind does not hold the stop."""
        self._stopped = True
        self.queue.close()
        self.waiting.stop()
        self._binders.shutdown(wait=False, cancel_futures=True)
        self.reporter.stop()
        with self._idle:
            self._idle.notify_all()

    def skip(self, qpi: QueuedPodInfo) -> bool:
        """Nothing to schedule: the pod is gone or bound meanwhile, or already assumed."""
        return self.gone(qpi) or self.cache.is_assumed(qpi.uid)

    def gone(self, qpi: QueuedPodInfo) -> bool:
        """The pod was deleted (or is terminating, or was re-created under its name) or bound meanwhile."""
        key = qpi.info.key
        current = self.virtual_pods.get(key) or (self.pods.get(key) if self.pods is not None else qpi.pod)
        if current is None:
            return True
        meta = current.get("metadata") or {}
        if str(meta.get("uid") or "") not in ("", qpi.uid) or meta.get("deletionTimestamp"):
            return True
        return bool((current.get("spec") or {}).get("nodeName"))

    # ---- permit and binding ------------------------------------------------------------------------

    def wait_on_permit(
        self,
        fw: Framework,
        state: CycleState,
        qpi: QueuedPodInfo,
        node: str,
        waits: Mapping[str, float],
        start: float,
        reasons: Sequence[str] = (),
    ) -> None:
        """Hold the pod until the plugins in ``waits`` allow it (``reasons``: why each one holds it)."""
        now = self.waiting._clock()
        deadlines = {plugin: now + seconds for plugin, seconds in waits.items()}

        def done(st: Status | None) -> None:
            self.waiting.remove(qpi.uid)
            if st is None:
                self.submit_binding(fw, state, qpi, node, start)
            else:
                self._submit(self._give_up, fw, state, qpi, node, st)

        wp = WaitingPod(qpi.info, node, deadlines, done, dict(zip(waits, reasons, strict=False)), waits)
        self.waiting.add(qpi.uid, wp, deadlines)

    def submit_binding(
        self, fw: Framework, state: CycleState, qpi: QueuedPodInfo, node: str, start: float
    ) -> None:
        """Run the binding cycle on a binding thread; ``start`` is when the scheduling cycle began (the
        attempt's duration spans both cycles, as kube-scheduler measures it)."""
        self._submit(self._binding_cycle, fw, state, qpi, node, start)

    def _binding_cycle(
        self, fw: Framework, state: CycleState, qpi: QueuedPodInfo, node: str, start: float
    ) -> None:
        pod = qpi.pod
        try:
            st = fw.run_pre_bind(state, pod, node)
            if st is None and isinstance(fw.handle, SchedulerHandle):
                st = fw.handle.apply_patch(state, pod)  # what DefaultPreBind did not send (not enabled)
            if st is None:
                # The node may have gone while Permit waited or PreBind ran: the API server would still
                # accept the binding (it does not check the node), leaving the pod on no node.
                st = fw.run_bind(state, pod, node) if self.cache.has_node(node) else node_gone(node)
                if st.code is Code.SKIP:
                    st = Status(Code.ERROR, ("no Bind plugin bound the pod",))
                elif st.is_success:
                    st = None
        except Exception as err:
            log.exception("binding %s to %s failed unexpectedly", qpi.info.key, node)
            st = Status(Code.ERROR, (f"internal error: {err!r}",))
        if st is not None:
            self._give_up(fw, state, qpi, node, st)
            return
        self.cache.finish_binding(qpi.uid)
        self.forget_condition(qpi.uid)
        self.metrics.attempt(fw.profile.scheduler_name, "scheduled", time.perf_counter() - start)
        self.metrics.pod_attempts.observe(qpi.attempts)
        if qpi.initial_attempt is not None:
            self.metrics.scheduled(qpi.attempts, self._clock() - qpi.initial_attempt)
        if qpi.info.key not in self.virtual_pods:  # a reserve pod's Bind plugin tells its reservation
            note = f"Successfully assigned {qpi.info.key} to {node}"
            self.api.event(pod, "Normal", "Scheduled", note, action="Binding")
        fw.run_post_bind(state, pod, node)

    def _give_up(self, fw: Framework, state: CycleState, qpi: QueuedPodInfo, node: str, st: Status) -> None:
        """A binding that will not happen: Unreserve, forget the assumed pod, back to the queue. The room
        it held is free again, which is an assigned pod's deletion to the pods waiting for room
        (kube-scheduler's ``handleBindingCycleError``); the pod itself is not in the queue to be moved."""
        fw.run_unreserve(state, qpi.pod, node)
        self.forget(qpi, node)
        self.failure(fw, qpi, st, time.perf_counter(), error=st.code is Code.ERROR)

    def forget(self, qpi: QueuedPodInfo, released: str = "") -> None:
        """Undo the assumption of ``qpi`` and tell the forget handlers; ``released``: the node of a
        binding cycle that failed, whose room goes to the pods waiting for it (:meth:`room_freed`)."""
        if not self.cache.forget_pod(qpi.uid):
            return
        self.hooks.forgotten(qpi.pod)
        if released:
            self.room_freed(qpi.pod, released)

    def room_freed(self, pod: Obj, node: str) -> None:
        """An assumed pod left the cache without binding: to the queue, an assigned pod's deletion (the
        pod as it was assumed, on its node, as kube-scheduler hands its hints the assumed pod)."""
        assumed = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": node}}
        self.queue.on_event(ASSIGNED_POD_DELETE, assumed, None)

    def reject_waiting(self, uid: str, message: str) -> None:
        wp: WaitingPod | None = self.waiting.get(uid)
        if wp is not None:
            wp.reject("", message)

    # ---- failures -------------------------------------------------------------------------------

    def failure(
        self,
        fw: Framework,
        qpi: QueuedPodInfo,
        err: FitError | PluginFailure | Status,
        start: float,
        *,
        error: bool = False,
        nominated: str | None = None,
    ) -> None:
        """Back to the queue (unless the pod is gone or bound meanwhile), with an Event and the
        ``PodScheduled=False`` condition saying why; ``nominated`` (PostFilter's answer) sets the pod's
        ``status.nominatedNodeName`` (``""`` clears it, ``None`` leaves it)."""
        profile = fw.profile.scheduler_name
        if isinstance(err, FitError):
            qpi.unschedulable_plugins = set(err.diagnosis.unschedulable_plugins)
            qpi.pending_plugins = set(err.diagnosis.pending_plugins)
            message = str(err) if err.num_nodes else "no nodes available to schedule pods"
        elif isinstance(err, Status):
            qpi.unschedulable_plugins = {err.plugin} if err.plugin and not error else set()
            message = err.message or f"rejected by {err.plugin}"
        else:
            message = str(err)
        qpi.error = error
        reason = "SchedulerError" if error else "Unschedulable"
        self.metrics.attempt(profile, "error" if error else "unschedulable", time.perf_counter() - start)
        if self.gone(qpi):
            self.queue.done(qpi.uid)
            return
        if nominated is not None:
            # Before the API server has it, so the next cycles keep the room for this pod already.
            self.nominator.add(qpi.info, nominated)
            current = self.pods.get(qpi.info.key) if self.pods is not None else None
            if nominated == nominated_node_name(current or qpi.pod):
                nominated = None  # the API has it already

        def default() -> None:
            self.queue.add_unschedulable(qpi)
            log.info("unable to schedule %s: %s", qpi.info.key, message)
            if qpi.info.key not in self.virtual_pods:  # no pod to tell: error handlers tell its owner
                self.reporter.report(qpi.pod, reason, message, nominated)

        why = (
            err
            if isinstance(err, Status)
            else Status(Code.ERROR if error else Code.UNSCHEDULABLE, (message,))
        )
        if not self.hooks.handle_error(qpi.pod, why, default):
            self.queue.done(qpi.uid)  # a handler took the failure over: the pod leaves the queue's care

    def forget_condition(self, uid: str) -> None:
        self.reporter.forget(uid)


def _allowed_mask(nodes: NodeSet, allowed: frozenset[str]) -> np.ndarray:
    return np.fromiter((ni.name in allowed for ni in nodes), dtype=bool, count=len(nodes))
