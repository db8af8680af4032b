"""Exposition: ``/metrics`` rendered once per collection equals a fresh ``generate_latest`` of the same
registry, is served as the same bytes (gzip when asked) over the agent's HTTP server, drops deleted pods,
parses, and survives a failing collector."""

from __future__ import annotations

import gzip
import select
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from koordlet.metricsadvisor.exposition import Exposition, Payload, RowFamily
from koordlet.testing import FakeClock, FakeStates, container_id, make_pod, pod_uid, wait_until
from koordlet.testing.wakeups import voluntary_switches
from koordshared.runtime.httpserver import ProcessHTTPServer
from koordshared.runtime.httpwire import parse_head
from koordshared.runtime.lifecycle import Supervisor
from tests.unit.koordlet.metricsadvisor.test_advisor import build, prepare


def advisor_with_pods(fake_host: Any, fake_clock: FakeClock, n: int) -> tuple[Any, FakeStates, Any]:
    pods = [make_pod(f"pod-{i}", uid=pod_uid(i), container_ids=[container_id(i)]) for i in range(1, n + 1)]
    prepare(fake_host, pods)
    states = FakeStates(pods=pods)
    reg = CollectorRegistry()
    Counter("koordlet_test_requests", "A counter\nwith a \\ and a newline in its help", registry=reg).inc(3)
    adv = build(fake_host, states, fake_clock, reg)
    adv.collect_once()
    fake_clock.advance(1.0)
    adv.collect_once()
    return adv, states, reg


def test_rendered_bytes_equal_a_fresh_render_after_each_collection(
    fake_host: Any, fake_clock: FakeClock
) -> None:
    adv, states, reg = advisor_with_pods(fake_host, fake_clock, 3)
    ex = adv.exposition
    assert ex is not None
    first = ex.render().body
    assert first == generate_latest(reg)
    assert pod_uid(2).encode() in first and b"koordlet_pod_resource_usage{" in first
    # the next sweep: new values, the remembered prefixes must not leak old values or old series
    for p in states.pod_list:
        fake_host.write_cgroup("cpuacct.usage", fake_host.pod_cgroup(p.uid), "500000000")
    states.pod_list = [p for p in states.pod_list if p.uid != pod_uid(2)]
    adv.gc()
    fake_clock.advance(1.0)
    adv.collect_once()
    second = ex.render().body
    assert second == generate_latest(reg)
    assert second != first
    assert pod_uid(2).encode() not in second
    assert container_id(2).encode() not in second
    assert pod_uid(3).encode() in second
    adv.shutdown()


def test_row_family_escapes_label_values_like_prometheus_client() -> None:
    class Odd:
        def collect(self) -> Iterator[Metric]:
            fam = RowFamily("odd_gauge", "help with \\ and\nnewline", ["z", "a", "m"])
            fam.add_metric(['quote " here', "back\\slash", "new\nline"], 1e21)
            fam.add_metric(["", "é", "x"], float("nan"))
            fam.add_metric(["1", "2", "3"], 12345678.0)
            yield fam
            empty = RowFamily("no_labels", "plain", [])
            empty.add_metric([], -0.5)
            yield empty

    reg = CollectorRegistry()
    reg.register(Odd())
    ex = Exposition(reg)
    assert ex.render().body == generate_latest(reg)
    assert ex.render().body == generate_latest(reg)  # from the remembered prefixes too
    assert reg.get_sample_value("odd_gauge", {"z": "1", "a": "2", "m": "3"}) == 12345678.0
    with pytest.raises(ValueError):
        RowFamily("bad", "x", ["a"]).add_metric(["1", "2"], 1.0)


def test_gzip_decodes_to_the_same_bytes_and_the_text_parses(fake_host: Any, fake_clock: FakeClock) -> None:
    adv, _states, _reg = advisor_with_pods(fake_host, fake_clock, 2)
    assert adv.exposition is not None
    payload = adv.exposition.render()
    packed = payload.gzip()
    assert packed is payload.gzip()  # compressed once per payload
    assert gzip.decompress(packed) == payload.identity()
    families = {f.name: f for f in text_string_to_metric_families(payload.body.decode())}
    pod_samples = [
        s for s in families["koordlet_pod_resource_usage"].samples if s.labels["resource"] == "cpu"
    ]
    assert {s.labels["pod_uid"] for s in pod_samples} == {pod_uid(1), pod_uid(2)}
    assert families["koordlet_test_requests"].samples[0].value == 3.0
    adv.shutdown()


@pytest.mark.parametrize(
    ("header", "gz"),
    [
        (None, False),
        ("", False),
        ("gzip", True),
        ("deflate, GZIP;q=0.5", True),
        ("gzip;q=0", False),
        ("gzip; q=0.0, br", False),
        ("*", True),
        ("identity", False),
        ("gzip;q=abc", False),
    ],
)
def test_accept_encoding(header: str | None, gz: bool) -> None:
    line = b"" if header is None else f"Accept-Encoding: {header}\r\n".encode()
    assert parse_head(b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + line + b"\r\n").accepts("gzip") is gz


def get(url: str, encoding: str | None) -> tuple[dict[str, str], bytes]:
    req = urllib.request.Request(url, headers={"Accept-Encoding": encoding} if encoding else {})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return dict(resp.headers.items()), resp.read()


def test_http_serves_the_payload_plain_or_gzip(fake_host: Any, fake_clock: FakeClock) -> None:
    adv, _states, reg = advisor_with_pods(fake_host, fake_clock, 2)
    ex = adv.exposition
    assert ex is not None
    http = ProcessHTTPServer("127.0.0.1", 0, reg)
    http.route("/metrics", ex.route)
    http.start()
    try:
        url = f"http://127.0.0.1:{http.port}/metrics"
        headers, plain = get(url, None)
        assert "Content-Encoding" not in headers and headers["Vary"] == "Accept-Encoding"
        assert headers["Content-Type"] == CONTENT_TYPE_LATEST
        headers, packed = get(url, "gzip")
        assert headers["Content-Encoding"] == "gzip"
        assert gzip.decompress(packed) == plain
        _, refused = get(url, "gzip;q=0")
        assert refused == plain
        assert ex.renders == 1  # three scrapes, one render: the first scrape found no payload
        assert plain == generate_latest(reg)
    finally:
        http.shutdown()
        adv.shutdown()


def test_scrapes_serve_the_last_render_until_the_next_collection(fake_host: Any) -> None:
    reg = CollectorRegistry()
    hits = Counter("hits", "incremented between renders", registry=reg)
    clock = FakeClock()
    ex = Exposition(reg, interval=0.05, max_staleness=10.0, clock=clock)
    first = ex.payload()
    hits.inc()
    assert ex.payload() is first  # no collection yet: the same bytes, not a new render
    stop = threading.Event()
    sup = Supervisor(stop)
    sup.go("exposition", lambda: ex.run(stop))
    try:
        ex.collected()
        deadline = time.monotonic() + 5.0
        while ex.payload() is first and time.monotonic() < deadline:
            time.sleep(0.01)
        assert b"hits_total 1.0" in ex.payload().body
    finally:
        ex.close()
        stop.set()
        assert sup.join(time.monotonic() + 5.0) == []
    # a payload older than max_staleness (the render thread stuck or gone) is rendered by the scrape
    hits.inc()
    before = ex.payload()
    clock.advance(10.5)
    after = ex.payload()
    assert after is not before and b"hits_total 2.0" in after.body


def test_a_failing_render_keeps_the_last_payload_and_is_counted(caplog: pytest.LogCaptureFixture) -> None:
    class Flaky:
        fail = False

        def collect(self) -> Iterator[Metric]:
            if self.fail:
                raise OSError("collector broke")
            fam = RowFamily("flaky", "x", [])
            fam.add_metric([], 1.0)
            yield fam

    reg = CollectorRegistry()
    flaky = Flaky()
    reg.register(flaky)
    errors: list[BaseException] = []
    ex = Exposition(reg, on_error=errors.append)
    good: Payload = ex.render()
    flaky.fail = True
    assert ex.render() is good
    assert ex.render() is good
    assert [type(e) for e in errors] == [OSError, OSError]  # counted every time, logged once
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    flaky.fail = False
    assert ex.render() is not good
    flaky.fail = True
    empty = Exposition(reg)
    with pytest.raises(OSError):
        empty.payload()  # nothing to fall back on: the route answers 500


def test_twenty_scrapers_connecting_at_once_are_all_queued() -> None:
    # With socketserver's backlog of 5 the kernel drops the SYNs of the 7th and later simultaneous
    # clients and they retry after a second. Nothing accepts here (the server is not started), so the
    # only thing that completes the handshakes is the listen queue.
    http = ProcessHTTPServer("127.0.0.1", 0, CollectorRegistry())
    socks = [socket.socket() for _ in range(40)]
    try:
        for s in socks:
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", http.port))
        pending = list(socks)
        deadline = time.monotonic() + 0.8  # before the first SYN retransmission (1 s)
        while pending and time.monotonic() < deadline:
            _r, writable, _x = select.select([], pending, [], 0.05)
            pending = [s for s in pending if s not in writable]
        assert pending == []
        assert all(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0 for s in socks)
    finally:
        for s in socks:
            s.close()
        http.shutdown()


def collected_and_rendered(ex: Exposition) -> bool:
    """Tell ``ex`` a collection finished; whether its thread rendered within 0.3 s."""
    n = ex.renders
    ex.collected()
    deadline = time.monotonic() + 0.3
    while ex.renders == n and time.monotonic() < deadline:
        time.sleep(0.005)
    return ex.renders > n


def test_rendering_ahead_only_while_scraped() -> None:
    """Unscraped, collections render nothing; the first scrape renders in place (and sees the latest
    values), and so does the second (no period known yet); later collections render ahead, and
    ``idle_after`` without a scrape stops that again."""
    reg = CollectorRegistry()
    hits = Counter("hits", "incremented between renders", registry=reg)
    clock = FakeClock()
    ex = Exposition(reg, interval=10.0, idle_after=60.0, clock=clock)  # no timed renders in the test
    stop = threading.Event()
    sup = Supervisor(stop)
    sup.go("exposition", lambda: ex.run(stop))

    try:
        for _ in range(3):
            collected_and_rendered(ex)
        assert ex.renders == 0, "rendered for nobody"
        hits.inc()
        first = ex.payload()
        assert ex.renders == 1 and b"hits_total 1.0" in first.body
        hits.inc()
        assert not collected_and_rendered(ex)  # one scrape gives no period: nothing rendered ahead
        clock.advance(10.0)
        assert b"hits_total 2.0" in ex.payload().body and ex.renders == 2  # in place; period 10 s
        hits.inc()
        clock.advance(10.0)
        assert collected_and_rendered(ex)  # within an interval of the next scrape: rendered ahead
        assert ex.renders == 3 and b"hits_total 3.0" in ex.payload().body  # and served
        assert ex.renders == 3
        clock.advance(61.0)
        hits.inc()
        collected_and_rendered(ex)
        assert ex.renders == 3, "still rendering ahead a minute after the last scrape"
        # the payload is behind the collections: the scrape renders rather than serving old values
        assert b"hits_total 4.0" in ex.payload().body and ex.renders == 4
    finally:
        ex.close()
        stop.set()
        assert sup.join(time.monotonic() + 5.0) == []


def test_rendering_ahead_follows_the_scrape_period() -> None:
    """Scraped every 10 s with 1 s collections, only the collections just before the next scrape are
    rendered; a scrape that comes early renders in place and still sees the latest collection."""
    reg = CollectorRegistry()
    hits = Counter("hits", "incremented every collection", registry=reg)
    clock = FakeClock()
    ex = Exposition(reg, interval=1.0, idle_after=60.0, clock=clock)
    stop = threading.Event()
    sup = Supervisor(stop)
    sup.go("exposition", lambda: ex.run(stop))

    def collection() -> bool:
        """One collection a second later; whether the exposition rendered it."""
        clock.advance(1.0)
        hits.inc()
        return collected_and_rendered(ex)

    try:
        ex.payload()
        for _ in range(10):  # the first period: no gap known yet, nothing is rendered ahead
            assert not collection()
        before = ex.renders
        assert f"hits_total {hits._value.get()}".encode() in ex.payload().body  # gap 10 s: rendered in place
        assert ex.renders == before + 1
        rendered = [collection() for _ in range(9)]
        assert rendered == [False] * 8 + [True]  # t+9 only: the scrape at t+10 is within its interval
        before = ex.renders
        body = ex.payload().body  # on time: served as rendered
        assert ex.renders == before and f"hits_total {hits._value.get()}".encode() in body
        assert [collection() for _ in range(3)] == [False] * 3
        early = ex.payload()  # 3 s after the last one: the payload is behind, rendered in place
        assert ex.renders == before + 1 and f"hits_total {hits._value.get()}".encode() in early.body
        # a 3 s gap is now the period: t+2 is within an interval of the scrape due at t+3, and t+3 is late
        assert [collection() for _ in range(3)] == [False, True, True]
    finally:
        ex.close()
        stop.set()
        assert sup.join(time.monotonic() + 5.0) == []


def test_a_scrape_never_gets_a_payload_older_than_the_last_collection() -> None:
    """Between a collection and the render thread's render of it, a scrape renders in place instead of
    serving the payload from before the collection (two scrapes a moment apart must not go backwards)."""
    reg = CollectorRegistry()
    hits = Counter("hits", "incremented by every collection", registry=reg)
    ex = Exposition(reg, interval=1.0, clock=FakeClock())  # no render thread: every collection is pending
    assert b"hits_total 0.0" in ex.payload().body
    hits.inc()
    ex.collected()
    assert b"hits_total 1.0" in ex.payload().body and ex.renders == 2
    assert ex.payload().body == ex.payload().body and ex.renders == 2, "re-rendered an up-to-date payload"


def test_the_render_thread_sleeps_through_collections_nobody_fetches() -> None:
    # It woke for every collection (and every two intervals) to find nothing due.
    ex = Exposition(CollectorRegistry(), interval=0.05)
    stop = threading.Event()
    sup = Supervisor(stop)
    thread = sup.go("exposition", lambda: ex.run(stop))
    try:
        wait_until(lambda: thread.native_id is not None, 5)
        before = voluntary_switches(thread)
        for _ in range(20):  # no scrape ever came: none of these is due
            ex.collected()
            time.sleep(0.02)
        assert voluntary_switches(thread) - before <= 1
        assert ex.renders == 0
    finally:
        ex.close()
        stop.set()
        started = time.monotonic()
        assert sup.join(time.monotonic() + 5.0) == []
        assert time.monotonic() - started < 1.0  # close wakes it at once


def test_a_render_formats_only_the_rows_whose_value_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every render formatted every row again (a thousand pods' rows every scrape) although most pods'
    values are the same from one scrape to the next. Rows are remembered by family and labels with their
    value; only new rows and changed values are formatted, and the bytes equal a fresh render."""
    from koordlet.metricsadvisor import exposition

    values = {f"pod-{i}": float(i) for i in range(100)}

    class Pods:
        def collect(self) -> Iterator[Metric]:
            fam = RowFamily("pod_usage", "usage", ["pod"])
            for pod, v in values.items():
                fam.add_metric([pod], v)
            yield fam

    formatted: list[float] = []
    real = exposition._go_float

    def counting_format(v: float) -> str:
        formatted.append(v)
        return real(v)

    monkeypatch.setattr(exposition, "_go_float", counting_format)
    reg = CollectorRegistry()
    reg.register(Pods())
    ex = Exposition(reg)
    assert ex.render().body == generate_latest(reg)
    assert len(formatted) == 100
    formatted.clear()
    values["pod-3"] = 0.5
    values["pod-0"] = -0.0  # prints apart from 0.0
    values["pod-new"] = 7.0
    del values["pod-9"]
    assert ex.render().body == generate_latest(reg)
    assert sorted(formatted) == [-0.0, 0.5, 7.0]
