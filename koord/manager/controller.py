"""A controller: a work queue of node names, workers that reconcile them, and the leadership gate.

Workers only take keys while this replica leads; every API write goes through :class:`Writer`, which
checks leadership immediately before sending (the elector's monotonic deadline, see
:mod:`koordshared.kube.leaderelection`) so a replica that lost the lead never writes again. A reconcile
that raises is retried with a per-key exponential delay; one that returns normally forgets the key's
failures. Reconciles may ask for a later look (``requeue_after``), e.g. when a NodeMetric will go stale.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from koord.manager.metrics import ManagerMetrics
from koordshared.kube.client import ApiError, request
from koordshared.kube.workqueue import WorkQueue
from koordshared.runtime.errors import APIUnavailable
from koordshared.runtime.lifecycle import Supervisor

log = logging.getLogger(__name__)


class NotLeader(Exception):
    """Leadership ended before a write: the key goes back to the queue for the next leader."""


class Writer:
    """API writes of one controller, gated on leadership and counted."""

    def __init__(
        self,
        api_client: Any,
        controller: str,
        metrics: ManagerMetrics,
        is_leader: Callable[[], bool],
        timeout: float,
    ) -> None:
        self.api_client = api_client
        self.controller = controller
        self.metrics = metrics
        self.is_leader = is_leader
        self.timeout = timeout

    def send(
        self, verb: str, method: str, path: str, body: Any = None, *, content_type: str = "application/json"
    ) -> Any:
        """One write; :class:`NotLeader` when not leading, else as :func:`koordshared.kube.client.request`."""
        if not self.is_leader():
            raise NotLeader(f"{self.controller}: not the leader, {verb} {path} not sent")
        try:
            out = request(
                self.api_client,
                f"{self.controller} {verb}",
                method,
                path,
                body=body,
                timeout=self.timeout,
                content_type=content_type,
            )
        except ApiError as err:
            self.metrics.writes.labels(self.controller, verb, "conflict" if err.conflict else "error").inc()
            raise
        except APIUnavailable:
            self.metrics.writes.labels(self.controller, verb, "error").inc()
            raise
        self.metrics.writes.labels(self.controller, verb, "ok").inc()
        return out


Reconcile = Callable[[str], "float | None"]
"""Returns ``None`` or seconds after which to look at the key again."""


class Controller:
    def __init__(
        self,
        name: str,
        reconcile: Reconcile,
        metrics: ManagerMetrics,
        *,
        is_leader: Callable[[], bool] = lambda: True,
        workers: int = 2,
    ) -> None:
        self.name = name
        self.reconcile = reconcile
        self.metrics = metrics
        self.is_leader = is_leader
        self.workers = workers
        self.queue = WorkQueue(name)
        self.reconciles = 0
        metrics.bind_queue(name, lambda: len(self.queue))

    def enqueue(self, key: str) -> None:
        self.queue.add(key)

    def enqueue_all(self, keys: Iterable[str]) -> None:
        self.queue.add_all(list(keys))

    def start(self, stop: threading.Event, supervisor: Supervisor) -> None:
        for i in range(self.workers):
            supervisor.go(f"{self.name}-worker-{i}", lambda: self._work(stop))

    def shutdown(self) -> None:
        self.queue.shut_down()

    def process_one(self, key: str) -> None:
        """Reconcile ``key`` once with retries decided here (the workers' body; tests call it directly)."""
        result = "success"
        try:
            after = self.reconcile(key)
        except NotLeader:
            result = "not_leader"
            self.queue.add(key)  # kept for whoever leads next (maybe us again)
        except Exception as err:
            result = "error"
            delay = self.queue.add_rate_limited(key)
            level = logging.WARNING if self.queue.num_requeues(key) <= 3 else logging.DEBUG
            log.log(
                level, "%s %s: %s; retrying in %.2fs", self.name, key, str(err) or type(err).__name__, delay
            )
        else:
            self.queue.forget(key)
            if after is not None:
                self.queue.add_after(key, after)
        self.reconciles += 1
        self.metrics.reconciles.labels(self.name, result).inc()

    def _work(self, stop: threading.Event) -> None:
        while not stop.is_set():
            if not self.is_leader():
                stop.wait(0.05)
                continue
            key = self.queue.get(timeout=0.2)
            if key is None:
                if self.queue.shutting_down:
                    return
                continue
            try:
                self.process_one(key)
            finally:
                self.queue.done(key)
