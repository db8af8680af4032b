"""The evictor (``api.Evictor``): Eviction API or process kill, TTL cache, audit, Events, metrics, dry run.

With ``--only-evict-by-api`` it asks the API server for a policy/v1 Eviction with a UID precondition (so a
recreated pod of the same name is untouched); a 429 (PDB) is retried on a later round. Otherwise it kills
the pod's processes through its cgroup (koordlet stops containers through the CRI; killing the cgroup's
processes has the same effect on the node and needs no runtime socket). Each PID is pinned with a pidfd
and checked to still be in the pod's cgroup before the signal, so PID reuse cannot hit another process.

Safety is enforced here too, whatever a plugin asks: only BE pods and pods their owner labelled
``koordinator.sh/eviction-enabled: "true"`` (the priority-based strategies' victims), never DaemonSet or
static pods.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter

from koordlet import api, metricdefs
from koordlet.resourceexecutor.audit import AuditLog
from koordlet.statesinformer.eviction import EvictionAPI, EvictResult

log = logging.getLogger(__name__)

EVICTED_TTL = 120.0
"""Seconds a successful eviction is remembered (koordlet: 2 min cache)."""
BLOCKED_RETRY = 5.0
"""Seconds before a 429-blocked eviction of the same pod is tried again."""
KILL_DEPTH = 3


def refusal(pod: api.PodInfo) -> str:
    """Why this pod may not be evicted by the agent, or an empty string."""
    if not pod.is_best_effort and not pod.eviction_enabled:
        return (
            f"pod {pod.namespace}/{pod.name} is {pod.qos or pod.kube_qos}, not BE, and not labelled "
            f"{api.LABEL_EVICTION_ENABLED}=true"
        )
    if pod.owner_kind in api.NEVER_EVICTED_OWNERS:
        return f"pod {pod.namespace}/{pod.name} is owned by a {pod.owner_kind}"
    if not pod.uid:
        return f"pod {pod.namespace}/{pod.name} has no UID"
    return ""


class Evictor:
    """Implements ``api.Evictor`` for every plugin of the agent."""

    def __init__(
        self,
        *,
        node: str,
        host: api.HostReader,
        audit: AuditLog,
        clock: Callable[[], float],
        registry: CollectorRegistry | None = None,
        only_by_api: bool = False,
        eviction_api: EvictionAPI | None = None,
        dry_run: bool = False,
        kill: Callable[[int, int], None] | None = None,
    ) -> None:
        if only_by_api and eviction_api is None:
            raise ValueError("--only-evict-by-api needs an API server connection")
        self._node = node
        self._host = host
        self._audit = audit
        self._clock = clock
        self._only_by_api = only_by_api
        self._api = eviction_api
        self._dry_run = dry_run
        self._kill = kill
        self._evicted: dict[str, float] = {}
        self._blocked: dict[str, float] = {}
        self._lock = threading.Lock()
        registry = registry if registry is not None else CollectorRegistry()
        self._count = metricdefs.counter(metricdefs.POD_EVICTION, registry)
        self._detail = metricdefs.counter(metricdefs.POD_EVICTION_DETAIL, registry)
        self._refused = Counter(
            metricdefs.POD_EVICTION_REFUSED.name,
            metricdefs.POD_EVICTION_REFUSED.help,
            ["node"],
            registry=registry,
        )

    def recently_evicted(self, uid: str) -> bool:
        now = self._clock()
        with self._lock:
            for key in [k for k, t in self._evicted.items() if now - t > EVICTED_TTL]:
                del self._evicted[key]
            return uid in self._evicted

    def evict(self, pod: api.PodInfo, reason: str, message: str) -> bool:
        why = refusal(pod)
        if why:
            log.error("refusing to evict: %s (%s)", why, reason)
            self._refused.labels(node=self._node).inc()
            return False
        if self.recently_evicted(pod.uid):
            return True
        now = self._clock()
        with self._lock:
            if now - self._blocked.get(pod.uid, -1e18) < BLOCKED_RETRY:
                return False
        target = f"{pod.namespace}/{pod.name}"
        if self._dry_run:
            log.warning("dry-run: would evict %s (%s): %s", target, reason, message)
            self._audit.record(
                owner=reason,
                reason=message,
                resource="pod/eviction",
                path=target,
                before=pod.uid,
                after="dry-run",
            )
            return False
        if self._only_by_api:
            assert self._api is not None
            result = self._api.evict(pod, reason, message)
            outcome, done = result.value, result.done
            if result is EvictResult.BLOCKED:
                with self._lock:
                    self._blocked[pod.uid] = now
        else:
            killed = self.kill_pod(pod)
            outcome = f"killed {killed} process(es)"
            done = True
        self._audit.record(
            owner=reason, reason=message, resource="pod/eviction", path=target, before=pod.uid, after=outcome
        )
        if not done:
            log.warning("eviction of %s not done: %s", target, outcome)
            return False
        with self._lock:
            self._evicted[pod.uid] = now
        self._count.labels(node=self._node, reason=reason).inc()
        self._detail.labels(
            node=self._node, pod_namespace=pod.namespace, pod_name=pod.name, reason=reason
        ).inc()
        log.warning("evicted %s (%s): %s [%s]", target, reason, message, outcome)
        if self._api is not None and not self._only_by_api:  # the API path records its own Event
            try:
                self._api.record_event(
                    "Pod",
                    pod.namespace,
                    pod.name,
                    pod.uid,
                    "Warning",
                    "evictPodSuccess",
                    f"evict Pod:{target}, reason: {reason}, message: {message}",
                )
            except Exception:
                log.debug("event for %s not recorded", target, exc_info=True)
        return True

    def kill_pod(self, pod: api.PodInfo) -> int:
        """SIGKILL every process of the pod's cgroup tree; returns how many were signalled."""
        if not pod.cgroup_dir:
            return 0
        killed = 0
        for cgroup in self._host.list_cgroups(pod.cgroup_dir, KILL_DEPTH):
            try:
                raw = self._host.read("cgroup.procs", cgroup)
            except api.KoordletError as err:
                log.warning("cannot list the processes of %s: %s", cgroup, err)
                continue
            for token in (raw or "").split():
                if token.isdecimal() and self._kill_pid(int(token), cgroup):
                    killed += 1
        return killed

    def _kill_pid(self, pid: int, cgroup: str) -> bool:
        if self._kill is not None:
            self._kill(pid, signal.SIGKILL)
            return True
        try:
            fd = os.pidfd_open(pid)
        except (ProcessLookupError, OSError):
            return False
        try:
            # The pidfd pins this exact process; if it is still listed in the pod's cgroup now, the PID
            # was not reused between the read of cgroup.procs and the signal.
            still = (self._host.read("cgroup.procs", cgroup) or "").split()
            if str(pid) not in still:
                return False
            signal.pidfd_send_signal(fd, signal.SIGKILL)
            return True
        except ProcessLookupError:
            return False
        finally:
            os.close(fd)
