"""NodeMetric reporting: one :meth:`NodeMetricReporter.report_once` per interval, rate limited, retried
with exponential backoff on 409/429/5xx and connection errors.

Each report replaces the whole status, as koordlet's ``UpdateStatus`` does, so whatever the new status
leaves out (a pod that left the node, a host application no longer configured, a previous process's
prediction) leaves the object too. No status is sent before the metric cache holds a node usage sample
(koordlet sends an empty ``nodeUsage`` then, which reads as an idle node); the standalone file, a local
mirror, is written regardless. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from koordlet.statesinformer.config import InformerConfig
from koordlet.statesinformer.metrics import InformerMetrics
from koordlet.statesinformer.nodemetric import write_atomic
from koordshared.apis.slo.nodemetric import CollectPolicy, node_usage_problem
from koordshared.kube.ratelimit import Backoff, TokenBucket
from koordshared.runtime.errors import APIUnavailable

log = logging.getLogger(__name__)
FILE_NAME = "nodemetric.json"
NO_USAGE_RETRY_SECONDS = 1.0
"""How soon a report held back for want of a node usage sample is tried again (samples come every
``--collect-res-used-interval``)."""


class StatusSink(Protocol):
    def update_node_metric_status(
        self, status: Mapping[str, Any], current: Mapping[str, Any] | None
    ) -> int: ...

    def create_node_metric(self) -> int: ...


class NodeMetricReporter:
    """Reports ``build(policy)`` to ``sink`` (cluster) or to ``file`` (standalone); ``node_metric`` is
    the NodeMetric object as the watch holds it (``None``: not seen, or standalone), whose spec sets the
    policy and whose resourceVersion the status replaces."""

    def __init__(
        self,
        config: InformerConfig,
        build: Callable[[CollectPolicy], dict[str, Any]],
        node_metric: Callable[[], Mapping[str, Any] | None],
        *,
        clock: Callable[[], float],
        metrics: InformerMetrics,
        sink: StatusSink | None = None,
        file: Path | None = None,
    ) -> None:
        self.config = config
        self._build = build
        self._node_metric = node_metric
        self._clock = clock
        self._metrics = metrics
        self.sink = sink
        self.file = file
        self._file_error = ""
        """The last write error of ``file``, so a lasting one is logged once, not every attempt."""
        self.limiter = TokenBucket(config.status_qps, config.status_burst, clock)
        self.backoff = Backoff(initial=0.5, cap=config.max_backoff_seconds)
        self._told_no_usage = False

    def _spec(self) -> Mapping[str, Any] | None:
        obj = self._node_metric()
        if obj is None:
            return None
        spec = obj.get("spec")
        return spec if isinstance(spec, Mapping) else {}

    def policy(self) -> CollectPolicy:
        spec = self._spec()
        if spec is None:
            d = CollectPolicy()
            return CollectPolicy(
                d.aggregate_duration_seconds,
                int(self.config.default_report_interval_seconds),
                d.durations,
                d.memory_policy,
            )
        return CollectPolicy.from_spec(spec)

    def interval(self) -> float:
        spec = self._spec()
        raw = (
            self.config.default_report_interval_seconds
            if spec is None
            else CollectPolicy.from_spec(spec).report_interval_seconds
        )
        return max(float(raw), self.config.report_interval_min_seconds)

    def _done(self, result: str, delay: float) -> float:
        self._metrics.nodemetric_report.labels(result=result).inc()
        return delay

    def report_once(self) -> float:
        """One attempt; returns the seconds until the next one (the interval, a backoff delay, or the
        rate limiter's wait)."""
        interval = self.interval()
        if self.sink is None:
            if self.file is not None:
                try:
                    write_atomic(self.file, self._build(self.policy()))
                except OSError as err:  # a full or read-only volume: report it, retry, never crash
                    why = f"{self.file}: {err.strerror or err}"
                    if why != self._file_error:
                        log.warning("nodemetric: cannot write %s; retrying with backoff", why)
                    self._file_error = why
                    return self._done("error", self.backoff.next())
                if self._file_error:
                    log.info("nodemetric: %s written again", self.file)
                    self._file_error = ""
                    self.backoff.reset()
            return self._done("written", interval)
        if self._spec() is None:
            if not self.config.create_node_metric:
                # Not seen yet (slo-controller has not made it, or our list is still running): look
                # again soon rather than a whole default interval later.
                return self._done("skipped", min(interval, self.config.report_interval_min_seconds, 5.0))
            try:
                code = self.sink.create_node_metric()
            except APIUnavailable as err:
                log.info("nodemetric: create failed: %s", str(err))
                return self._done("error", self.backoff.next())
            log.info("nodemetric: created the NodeMetric (%d)", code)
            return self._done("created", min(interval, 1.0))
        wait = self.limiter.wait_time()
        if wait > 0:
            return self._done("throttled", wait)
        status = self._build(self.policy())
        missing = node_usage_problem(status)
        if missing:
            # No node sample in the window yet (a fresh start): a report now would tell koord-manager the
            # node is idle. Looked at again soon; the write budget is kept for the first real report.
            # Said once per wait (the look again comes every second until the collectors sample).
            log.log(
                logging.DEBUG if self._told_no_usage else logging.INFO,
                "nodemetric: not reported yet, no node usage sample (%s)",
                missing,
            )
            self._told_no_usage = True
            return self._done("skipped", min(interval, NO_USAGE_RETRY_SECONDS))
        if not self.limiter.allow():
            return self._done("throttled", 0.01)
        try:
            code = self.sink.update_node_metric_status(status, self._node_metric())
        except APIUnavailable as err:
            delay = self.backoff.next()
            log.warning("nodemetric: API server unreachable (%s); retry in %.1fs", str(err), delay)
            return self._done("error", delay)
        if code == 200:
            self.backoff.reset()
            self._told_no_usage = False
            return self._done("ok", interval)
        if code == 404:
            return self._done("skipped", interval)
        delay = self.backoff.next()
        log.warning("nodemetric: status update answered %d; retry in %.1fs", code, delay)
        return self._done("retry" if code in (409, 429) or code >= 500 else "error", delay)

    def run(self, stop: threading.Event) -> None:
        """Report until ``stop``; a failing attempt is logged and retried, never fatal."""
        delay = 0.0
        while not stop.wait(delay):
            try:
                delay = self.report_once()
            except Exception:  # never let one bad status kill reporting for good
                log.exception("nodemetric: report failed")
                delay = self.backoff.next()
