"""NodeMetric reporter: skip until the object exists (or create it), rate limit, backoff on 409/429/5xx
and connection errors, reset after success, interval from the spec with the configured floor."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koordlet.statesinformer.config import InformerConfig
from koordlet.statesinformer.metrics import InformerMetrics
from koordlet.statesinformer.reporter import NodeMetricReporter
from koordlet.testing import FakeClock
from koordshared.apis.slo.nodemetric import CollectPolicy
from koordshared.runtime.errors import APIUnavailable, ConfigError


class Spec:
    """The NodeMetric the informer has seen, by its spec (``None``: no object yet); ``sampled``: whether
    the metric cache holds a node usage sample for the status."""

    def __init__(self, spec: dict[str, Any] | None) -> None:
        self.spec = spec
        self.sampled = True

    def __call__(self) -> dict[str, Any] | None:
        if self.spec is None:
            return None
        return {"metadata": {"name": "n", "resourceVersion": "7"}, "spec": self.spec}


class Sink:
    def __init__(self) -> None:
        self.answers: list[int | None] = []  # None = connection error
        self.patched: list[Mapping[str, Any]] = []
        self.read_at: list[str] = []
        self.created = 0

    def update_node_metric_status(self, status: Mapping[str, Any], current: Mapping[str, Any] | None) -> int:
        answer = self.answers.pop(0) if self.answers else 200
        if answer is None:
            raise APIUnavailable("connection refused")
        if answer == 200:
            self.patched.append(status)
            self.read_at.append(str(((current or {}).get("metadata") or {}).get("resourceVersion")))
        return answer

    def create_node_metric(self) -> int:
        self.created += 1
        return 201


def make(
    clock: FakeClock, spec: dict[str, Any] | None, **cfg: Any
) -> tuple[NodeMetricReporter, Sink, CollectorRegistry, list[CollectPolicy], Spec]:
    sink = Sink()
    registry = CollectorRegistry()
    policies: list[CollectPolicy] = []

    def build(policy: CollectPolicy) -> dict[str, Any]:
        policies.append(policy)
        usage = (
            {"nodeUsage": {"resources": {"cpu": "1", "memory": "1Gi"}}}
            if state.sampled
            else {"nodeUsage": {}}
        )
        return {"updateTime": str(clock.wall()), "nodeMetric": usage}

    state = Spec(spec)
    config = InformerConfig(node_name="n", report_interval_min_seconds=30, **cfg)
    reporter = NodeMetricReporter(
        config,
        build,
        state,
        clock=clock,
        metrics=InformerMetrics(registry),
        sink=sink,
    )
    return reporter, sink, registry, policies, state


def count(registry: CollectorRegistry, result: str) -> float:
    return registry.get_sample_value("koordlet_nodemetric_report_total", {"result": result}) or 0.0


def test_skips_until_the_object_exists(fake_clock: FakeClock) -> None:
    reporter, sink, registry, _, spec = make(fake_clock, None)
    delay = reporter.report_once()
    assert sink.patched == [] and sink.created == 0 and count(registry, "skipped") == 1
    assert delay <= 5.0  # looks again soon, not a whole interval later
    spec.spec = {}
    assert reporter.report_once() == 60.0  # koordlet's default interval
    assert len(sink.patched) == 1
    assert sink.read_at == ["7"], "the status replaces the object at the version the watch holds"


def test_creates_when_asked(fake_clock: FakeClock) -> None:
    reporter, sink, registry, _, _ = make(fake_clock, None, create_node_metric=True)
    reporter.report_once()
    assert sink.created == 1 and count(registry, "created") == 1


def test_interval_from_spec_with_floor(fake_clock: FakeClock) -> None:
    reporter, _, _, policies, spec = make(
        fake_clock, {"metricCollectPolicy": {"reportIntervalSeconds": 5, "aggregateDurationSeconds": 120}}
    )
    assert reporter.report_once() == 30.0  # 5 s asked, the floor is 30 s
    assert policies[-1].aggregate_duration_seconds == 120
    spec.spec = {"metricCollectPolicy": {"reportIntervalSeconds": 90}}
    assert reporter.report_once() == 90.0


def test_backoff_on_errors_then_reset(fake_clock: FakeClock) -> None:
    reporter, sink, registry, _, _ = make(fake_clock, {}, status_qps=100.0, status_burst=100)
    sink.answers = [None, 503, 429, 409, None, 200, None]
    delays = []
    for _ in range(7):
        delays.append(reporter.report_once())
        fake_clock.advance(delays[-1])
    assert delays[:5] == [0.5, 1.0, 2.0, 4.0, 8.0]  # exponential
    assert delays[5] == 60.0  # success: back to the interval
    assert delays[6] == 0.5  # and the backoff restarted
    assert count(registry, "retry") == 3 and count(registry, "error") == 3 and count(registry, "ok") == 1
    assert len(sink.patched) == 1


def test_backoff_is_capped(fake_clock: FakeClock) -> None:
    reporter, sink, _, _, _ = make(
        fake_clock, {}, status_qps=100.0, status_burst=100, max_backoff_seconds=3.0
    )
    sink.answers = [None] * 6
    delays = [reporter.report_once() for _ in range(6)]
    assert max(delays) == 3.0


def test_status_writes_rate_limited(fake_clock: FakeClock) -> None:
    reporter, sink, registry, _, _ = make(fake_clock, {})  # 0.1 QPS, burst 2
    assert count(registry, "ok") == 0
    for _ in range(5):
        reporter.report_once()
    assert (count(registry, "ok"), count(registry, "throttled")) == (2, 3)
    fake_clock.advance(10.0)
    reporter.report_once()
    assert count(registry, "ok") == 3 and len(sink.patched) == 3


def test_not_found_is_skipped_not_retried(fake_clock: FakeClock) -> None:
    reporter, sink, registry, _, _ = make(fake_clock, {})
    sink.answers = [404]
    assert reporter.report_once() == 60.0 and count(registry, "skipped") == 1


def test_nothing_reported_before_a_node_usage_sample(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    reporter, sink, registry, _, spec = make(fake_clock, {})  # 0.1 QPS, burst 2
    spec.sampled = False
    with caplog.at_level(logging.INFO, logger="koordlet.statesinformer.reporter"):
        delays = [reporter.report_once() for _ in range(3)]
    assert sink.patched == [] and count(registry, "skipped") == 3
    said = [r for r in caplog.records if "no node usage sample" in r.getMessage() and r.levelno >= 20]
    assert len(said) == 1, "said once per wait, not at every look"
    assert max(delays) <= 1.0, "looked at again within a sampling interval or so"
    spec.sampled = True
    assert reporter.report_once() == 60.0 and reporter.report_once() == 60.0
    assert len(sink.patched) == 2, "the skipped rounds spent none of the write budget"


def test_standalone_writes_file(fake_clock: FakeClock, tmp_path: Path) -> None:
    target = tmp_path / "koordlet" / "nodemetric.json"
    reporter = NodeMetricReporter(
        InformerConfig(node_name="n", report_interval_min_seconds=1, default_report_interval_seconds=2),
        lambda policy: {"updateTime": "t", "aggregate": policy.aggregate_duration_seconds},
        lambda: None,
        clock=fake_clock,
        metrics=InformerMetrics(None),
        file=target,
    )
    assert reporter.report_once() == 2.0
    assert target.read_text().replace(" ", "").replace("\n", "") == '{"aggregate":300,"updateTime":"t"}'


def test_config_refuses_nonsense() -> None:
    nonsense: list[dict[str, Any]] = [
        {"node_name": ""},
        {"pod_source": "etcd"},
        {"status_qps": 0},
        {"kubelet_sync_interval": -1},
    ]
    for bad in nonsense:
        with pytest.raises(ConfigError):
            InformerConfig(**{"node_name": "n", **bad})
    assert InformerConfig(node_name="n", kubelet_sync_interval=4).staleness == 8
