"""The pieces the real-apiserver benchmarks measure with, checked without a cluster: the audit-log reader
(pod creates, bindings and requests by client, on the server's clock) and the hollow reporter (each
node's beats at their cadences, spread over the period, a load change reported at once), and what
``bench/against_kube.py`` refuses before it starts a control plane."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bench.workloads.realsched import NS, Audit, client
from tests.realcluster import hollow


def _event(verb: str, resource: str, name: str, at: str, code: int = 201, **extra: Any) -> str:
    ref: dict[str, Any] = {"resource": resource, "namespace": NS, "name": name}
    if "subresource" in extra:
        ref["subresource"] = extra.pop("subresource")
    doc = {
        "stage": "ResponseComplete",
        "verb": verb,
        "objectRef": ref,
        "responseStatus": {"code": code},
        "stageTimestamp": at,
        "requestReceivedTimestamp": extra.pop("received", at),
        "userAgent": extra.pop("ua", "kube-scheduler/v1.34.4 (linux/amd64) kubernetes/abc/scheduler"),
    }
    return json.dumps(doc) + "\n"


def test_audit_reads_creates_and_first_bindings_on_the_server_clock(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text(
        _event("create", "pods", "p-0", "2026-01-01T00:00:00.100000Z", ua="koordlet-bench")
        + _event(
            "create",
            "pods",
            "p-0",
            "2026-01-01T00:00:00.250000Z",
            subresource="binding",
            received="2026-01-01T00:00:00.240000Z",
        )
        + _event("create", "pods", "p-0", "2026-01-01T00:00:00.300000Z", subresource="binding", code=409)
        + '{"stage": "ResponseComplete", "verb": "get"'  # a line still being written
    )
    audit = Audit(log, requests=[])
    audit.read()
    assert abs(audit.bound["p-0"] - audit.created["p-0"] - 0.15) < 1e-6
    assert abs(audit.bound["p-0"] - audit.bind_received["p-0"] - 0.01) < 1e-6  # the bind's own time
    assert (audit.binds, audit.failed_binds) == (1, 1)
    with log.open("a") as f:
        f.write(', "objectRef": {"resource": "leases"}, "stageTimestamp": "2026-01-01T00:00:00.4Z"}\n')
    audit.read()
    assert audit.requests is not None and len(audit.requests) == 4
    t0 = audit.created["p-0"] - 1
    rates = audit.rates(t0, t0 + 2)
    assert rates["koordlet-bench"]["create pods"] == 1
    assert rates["kube-scheduler"]["create pods/binding"] == 2
    assert client("koord-scheduler/0.1.0 (host_abc)") == "koord-scheduler"


class FakeRest:
    def __init__(self) -> None:
        self.calls: list[tuple[float, str, str]] = []
        self.lock = threading.Lock()

    def create(self, path: str, obj: Any, *, exist_ok: bool = False) -> Any:
        with self.lock:
            self.calls.append((time.monotonic(), "POST", path))

    def patch(self, path: str, body: Any) -> Any:
        with self.lock:
            self.calls.append((time.monotonic(), "PATCH", path))
        if path.endswith("/status") and "nodemetrics" in path:
            usage = body["status"]["nodeMetric"]["nodeUsage"]["resources"]
            assert usage["cpu"].endswith("m") or usage["cpu"].isdigit()


def test_hollow_reporter_beats_every_node_at_its_cadence_spread_over_the_period() -> None:
    rest = FakeRest()
    nodes = [f"n-{i}" for i in range(10)]
    reporter = hollow.HollowReporter(
        rest,  # type: ignore[arg-type]
        nodes,
        report_every=0.5,
        lease_every=0.2,
        status_every=10.0,
        threads=2,
    )
    reporter.start()
    try:
        time.sleep(1.05)
    finally:
        reporter.stop()
    made = [c for c in rest.calls if c[1] == "POST"]
    assert len(made) == len(nodes)  # one Lease each, before the beats
    leases = [c for c in rest.calls if c[1] == "PATCH" and "/leases/" in c[2]]
    reports = [c for c in rest.calls if "nodemetrics" in c[2]]
    # ~5 renewals and ~2 reports per node in a second; never all of a kind at once.
    assert 4 * len(nodes) <= len(leases) <= 6 * len(nodes)
    assert 2 * len(nodes) <= len(reports) <= 3 * len(nodes)
    assert reporter.sent["lease"] == len(leases) and reporter.lag < 0.2
    assert {p.rsplit("/", 1)[1] for _, _, p in leases} == set(nodes)
    # Spread: the first renewals of the ten nodes are a period apart end to end, not in one burst.
    firsts = [min(t for t, _, p in leases if p.endswith(f"/{n}")) for n in nodes]
    assert max(firsts) - min(firsts) > 0.1


def test_a_load_change_is_reported_at_once_and_followed_by_the_usage() -> None:
    rest = FakeRest()
    reporter = hollow.HollowReporter(rest, ["n-0"])  # type: ignore[arg-type]
    reporter.set_load("n-0", 0.2)
    low = reporter.usage("n-0")[0]
    sent = reporter.set_load("n-0", 0.85)
    assert rest.calls and rest.calls[-1][2].endswith("/nodemetrics/n-0/status")
    assert sent <= time.time()
    assert reporter.usage("n-0")[0] > low + 2000  # of 4000 millicores
    status = hollow.metric_status(1500, 2**30)
    # A hollow node runs no pods: all of its usage is the system's, so batch resources follow it.
    assert status["nodeMetric"]["systemUsage"] == status["nodeMetric"]["nodeUsage"]


def test_against_kube_refuses_a_scheduler_it_does_not_know_before_starting_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench import against_kube

    def unmet() -> str:
        raise AssertionError("went on to look for the binaries")

    monkeypatch.setattr(against_kube, "unmet", unmet)
    monkeypatch.setattr(sys, "argv", ["against_kube", "--quick", "--schedulers", "kube,kube-h2,koord"])
    with pytest.raises(SystemExit) as exit_:
        against_kube.main()
    assert exit_.value.code == 2
    assert "unknown --schedulers kube-h2: choose from kube,kube-json,kube-http1," in capsys.readouterr().err
