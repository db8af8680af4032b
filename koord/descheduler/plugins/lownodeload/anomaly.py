"""The anomaly detector that keeps LowNodeLoad from acting on a short spike (Koordinator's
``utils/anomaly.BasicDetector`` and the go-cache holding one per node and view).

A detector is OK or Anomaly. In OK, each abnormal mark counts one; the detector turns Anomaly when the
consecutive count is **greater than** ``consecutive_abnormalities`` (so the default 5 needs 6 rounds
over the threshold). Anomaly lasts ``timeout`` from when it began (further marks do not extend it) or
until the consecutive normal marks exceed ``consecutive_normalities``; then OK with the counters
cleared. Every state change clears the counters. A detector not marked abnormal for ``cache_timeout``
is dropped (a node gone from the cluster, or whose NodeMetric expired). Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from koord.descheduler.plugins.lownodeload.args import AnomalyCondition

OK = "OK"
ANOMALY = "Anomaly"


@dataclass(slots=True)
class Detector:
    condition: AnomalyCondition
    state: str = OK
    abnormal: int = 0
    """Consecutive abnormal marks."""
    normal: int = 0
    """Consecutive normal marks."""
    anomaly_until: float = 0.0
    last_set: float = 0.0

    def _set(self, state: str, now: float) -> None:
        if state == self.state:
            return
        self.state = state
        self._clear(now)

    def _clear(self, now: float) -> None:
        self.abnormal = self.normal = 0
        self.anomaly_until = now + self.condition.timeout if self.state == ANOMALY else 0.0

    def current(self, now: float) -> str:
        if self.state == ANOMALY and (
            now > self.anomaly_until or self.normal > self.condition.consecutive_normalities
        ):
            self._set(OK, now)
        return self.state

    def mark(self, normal: bool, now: float) -> str:
        """Record one round; the state after it."""
        state = self.current(now)
        if normal:
            self.abnormal, self.normal = 0, self.normal + 1
            if state == ANOMALY and self.normal > self.condition.consecutive_normalities:
                self._set(OK, now)
        else:
            self.abnormal, self.normal = self.abnormal + 1, 0
            if state == OK and self.abnormal > self.condition.consecutive_abnormalities:
                self._set(ANOMALY, now)
        return self.current(now)

    def reset(self, now: float) -> None:
        self.state = OK
        self._clear(now)


class Detectors:
    """One detector per node for one view (node usage or prod usage)."""

    def __init__(self, cache_timeout: float, clock: Callable[[], float]) -> None:
        self.cache_timeout = cache_timeout
        self._clock = clock
        self._by_node: dict[str, Detector] = {}

    def get(self, node: str) -> Detector | None:
        det = self._by_node.get(node)
        if det is not None and self._clock() - det.last_set >= self.cache_timeout:
            del self._by_node[node]
            return None
        return det

    def abnormal(self, nodes: list[str], condition: AnomalyCondition) -> set[str]:
        """Mark each of ``nodes`` abnormal for this round; the ones in the Anomaly state after it
        (every one when ``consecutive_abnormalities`` is 1: the detector is then bypassed)."""
        if condition.consecutive_abnormalities == 1:
            return set(nodes)
        now = self._clock()
        out = set()
        for name in nodes:
            det = self.get(name)
            if det is None:
                det = self._by_node[name] = Detector(condition)
            if det.mark(False, now) == ANOMALY:
                out.add(name)
            det.last_set = now
        return out

    def mark_normal(self, nodes: list[str]) -> None:
        now = self._clock()
        for name in nodes:
            det = self.get(name)
            if det is not None:
                det.mark(True, now)

    def reset(self, nodes: list[str]) -> None:
        now = self._clock()
        for name in nodes:
            det = self.get(name)
            if det is not None:
                det.reset(now)

    def count(self, node: str) -> int:
        """Consecutive abnormal rounds recorded for ``node`` (0 when it has no detector)."""
        det = self.get(node)
        return det.abnormal if det is not None else 0

    def state(self, node: str) -> str:
        det = self.get(node)
        return det.current(self._clock()) if det is not None else OK
