"""What a pod that could not be scheduled is told (kube-scheduler's ``handleSchedulingFailure`` writes): a
``FailedScheduling`` Event and the ``PodScheduled=False`` condition with ``nominatedNodeName``, the status
PATCH sent from a small pool of its own so that the scheduling loop never waits on it. Every failure is an
Event (repeats become the Event's series: :mod:`koordshared.kube.eventsv1`); the same condition twice is
written once (kube-scheduler skips unchanged updates); once the scheduler stops nothing is written (a
binding refused at a stopping replica's fence is the next leader's to report).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from koord.scheduler.core.api import APIFailed, ClusterAPI
from koord.scheduler.framework.types import Obj

log = logging.getLogger(__name__)


class StatusReporter:
    def __init__(self, api: ClusterAPI) -> None:
        self.api = api
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pod-status")
        self._conditions: dict[str, tuple[str, str, str | None]] = {}
        self._lock = threading.Lock()
        self._stopped = False

    def report(self, pod: Obj, reason: str, message: str, nominated: str | None) -> None:
        """``nominated``: the node to set as ``status.nominatedNodeName`` (``""`` clears it, ``None``
        leaves it)."""
        if self._stopped:
            return
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        key = (reason, message, nominated)
        self.api.event(pod, "Warning", "FailedScheduling", message)
        with self._lock:
            if self._conditions.get(uid) == key:
                return
            self._conditions[uid] = key
        condition = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}

        def patch() -> None:
            try:
                self.api.patch_status(pod, condition, nominated)
            except APIFailed as failed:
                log.info("updating the status of %s failed: %s", uid, failed)

        try:
            self._pool.submit(patch)
        except RuntimeError:  # shut down: a failure reported while stopping
            if not self._stopped:
                raise

    def forget(self, uid: str) -> None:
        """The pod was bound (or is gone): a later failure is news again."""
        with self._lock:
            self._conditions.pop(uid, None)

    def stop(self) -> None:
        self._stopped = True
        self._pool.shutdown(wait=False, cancel_futures=True)
