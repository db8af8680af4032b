"""The prod-reclaimable predictor (Koordinator's ``ProdReclaimablePredictor``) behind NodeMetric's
``prodReclaimableMetric`` and ``prodPeakMetric``. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from koordlet import api
from koordlet.prediction.server import SYSTEM_ITEM, PeakPredictServer, node_item_uid
from koordshared.apis.meta.quantity import to_int, to_milli
from koordshared.apis.slo.nodemetric import Usage

RAW_ALLOCATABLE_ANNOTATION = "node.koordinator.sh/raw-allocatable"
RECLAIMABLE_CLASSES = (api.PriorityClass.PROD, api.PriorityClass.NONE)
TERMINATED = ("Succeeded", "Failed")
POD, PRIORITY, MIN = "podReclaimablePredictor", "priorityReclaimablePredictor", "minPredictor"


class PredictionUnavailable(Exception):
    """No node, or a model the result needs is missing (cold agent): the report says so."""


def pod_request(pod: api.PodInfo) -> Usage:
    """CPU and memory requests of the app containers and sidecars."""
    cs = (*pod.containers, *pod.sidecars)
    return Usage(sum(c.cpu_request_milli for c in cs), sum(c.memory_request_bytes for c in cs))


def node_allocatable(node: api.NodeInfo) -> Usage:
    raw = node.annotations.get(RAW_ALLOCATABLE_ANNOTATION)
    if raw:
        try:
            doc = json.loads(raw)
            return Usage(to_milli(doc.get("cpu", 0)), to_int(doc.get("memory", 0)))
        except (ValueError, TypeError, AttributeError, api.InvalidValue):
            pass  # unreadable annotation: the node's own allocatable
    return Usage(node.cpu_allocatable_milli, node.memory_allocatable_bytes)


def _sub0(a: Usage, b: Usage) -> Usage:
    return Usage(max(a.cpu_milli - b.cpu_milli, 0), max(a.memory_bytes - b.memory_bytes, 0))


def _min(a: Usage, b: Usage) -> Usage:
    return Usage(min(a.cpu_milli, b.cpu_milli), min(a.memory_bytes, b.memory_bytes))


def _max(a: Usage, b: Usage) -> Usage:
    return Usage(max(a.cpu_milli, b.cpu_milli), max(a.memory_bytes, b.memory_bytes))


class ProdReclaimablePredictor:
    """Built per report; :meth:`add_pod` each pod with samples, then :meth:`result` and :meth:`peak`."""

    def __init__(
        self,
        server: PeakPredictServer,
        node: api.NodeInfo | None,
        now: float,
        record: Callable[[str, str, Usage], None] = lambda _kind, _predictor, _value: None,
    ) -> None:
        self._server = server
        self._node = node
        self._now = now
        self._ratio = (100 + server.config.safety_margin_percent) / 100
        self._record = record
        self._seen: set[str] = set()
        self._reclaimable = self._unreclaimable = self._unpredicted = self._requests = Usage()

    def add_pod(self, pod: api.PodInfo) -> None:
        if pod.priority_class not in RECLAIMABLE_CLASSES or pod.uid in self._seen:
            return
        self._seen.add(pod.uid)
        request = pod_request(pod)
        if self._now - pod.created_at <= self._server.config.cold_start_seconds:
            self._unpredicted += request
            self._requests += request if pod.phase not in TERMINATED else Usage()
            return
        if pod.phase in TERMINATED:
            return
        got = self._server.prediction(pod.uid)
        if got is None:
            self._unpredicted += request
            return  # Koordinator's min predictor stops at the first predictor's error
        peak = Usage(int(got.values["p95"][0] * self._ratio), int(got.values["p98"][1] * self._ratio))
        self._unreclaimable += peak
        self._reclaimable += Usage(
            max(request.cpu_milli - peak.cpu_milli, 0), max(request.memory_bytes - peak.memory_bytes, 0)
        )
        self._requests += request

    def _allocatable(self) -> Usage:
        if self._node is None:
            raise PredictionUnavailable("node unknown")
        return node_allocatable(self._node)

    def _priority_unreclaimable(self) -> Usage:
        total = Usage()
        for uid in (node_item_uid(SYSTEM_ITEM), *(node_item_uid(c.value) for c in RECLAIMABLE_CLASSES)):
            got = self._server.prediction(uid)
            if got is None:
                raise PredictionUnavailable(f"no model for {uid}")
            total += Usage(got.values["p95"][0], got.values["p98"][1])
        return Usage(int(total.cpu_milli * self._ratio), int(total.memory_bytes * self._ratio))

    def result(self) -> Usage:
        """The reclaimable prod resources (:class:`PredictionUnavailable` when it cannot be computed)."""
        alloc = self._allocatable()
        by_pod = _min(_sub0(alloc, self._unreclaimable), self._reclaimable)
        unreclaimable = self._priority_unreclaimable()
        by_priority = _min(_sub0(alloc, unreclaimable), _sub0(self._requests, unreclaimable))
        out = _min(by_pod, by_priority)
        for name, value in ((POD, by_pod), (PRIORITY, by_priority), (MIN, out)):
            self._record("reclaimable", name, value)
        return out

    def peak(self) -> Usage:
        """The predicted prod peak (:class:`PredictionUnavailable` without the priority models)."""
        by_pod = self._unreclaimable + self._unpredicted
        by_priority = self._priority_unreclaimable()
        out = _max(by_pod, by_priority)
        for name, value in ((POD, by_pod), (PRIORITY, by_priority), (MIN, out)):
            self._record("peak", name, value)
        return out
