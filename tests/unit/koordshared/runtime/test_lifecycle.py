"""Runtime (until, supervisor, event bus) and the daemon's start order, readiness and exit codes."""

from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from koordshared.runtime.eventbus import EventBus
from koordshared.runtime.httpserver import ProcessHTTPServer
from koordshared.runtime.lifecycle import Daemon, FuncComponent, Supervisor, Tick, until, wait_for


def test_until_keeps_going_after_a_failed_tick_and_stops_promptly() -> None:
    stop = threading.Event()
    calls: list[int] = []
    errors: list[str] = []

    def tick() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("bad tick")
        if len(calls) == 5:
            stop.set()

    until(tick, 0.01, stop, name="t", on_error=lambda n, e: errors.append(f"{n}:{e}"))
    assert len(calls) == 5 and errors == ["t:bad tick"]


def test_until_skips_missed_slots_instead_of_bursting() -> None:
    # Only lower bounds on real time are asserted: a busy machine can make ticks later, never earlier.
    stop = threading.Event()
    starts: list[float] = []
    timings: list[tuple[float, float]] = []

    def slow() -> None:
        starts.append(time.monotonic())
        if len(starts) == 1:
            time.sleep(0.12)  # the work of this tick overruns two 50 ms slots
        if len(starts) >= 4:
            stop.set()

    until(slow, 0.05, stop, name="s", on_tick=lambda _n, d, late: timings.append((d, late)))
    assert timings[0][0] >= 0.12  # the tick's own duration is reported
    assert all(late >= 0 for _d, late in timings)
    # after the overrun, the next tick waits for a slot on the grid; a burst of catch-up ticks would
    # start back to back instead of one period apart
    assert starts[1] - starts[0] >= 0.12
    # Tick k runs no earlier than its grid slot: slot 3 for the first tick after the overrun, then one
    # slot each. A burst of catch-up ticks would start tick 2 at ~0.12 s, well before slot 4 (0.20 s).
    # Two ticks may sit closer than a period when the earlier one was itself late, so only the distance
    # to the grid's origin (the first start minus its lateness) is bounded.
    origin = starts[0] - timings[0][1]
    assert all(s - origin >= (k + 2) * 0.05 - 0.005 for k, s in enumerate(starts[1:], start=1))


def test_supervisor_turns_a_dead_root_component_into_stop() -> None:
    stop = threading.Event()
    sup = Supervisor(stop)

    def die() -> None:
        raise RuntimeError("informer crashed")

    sup.go("informer", die)
    assert stop.wait(2.0)
    assert sup.failed and "informer" in sup.failures[0]
    assert sup.join(time.monotonic() + 1) == []


def test_event_bus_isolates_a_raising_subscriber() -> None:
    errors: list[str] = []
    bus = EventBus(on_error=lambda owner, err: errors.append(owner))
    seen: list[str] = []
    bus.subscribe("e", lambda: (_ for _ in ()).throw(RuntimeError("x")), owner="bad")
    bus.subscribe("e", lambda: seen.append("ok"), owner="good")
    bus.publish("e")
    assert seen == ["ok"] and errors == ["bad"]
    bus.unsubscribe_owner("good")
    bus.publish("e")
    assert seen == ["ok"]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_daemon_start_order_readiness_and_reverse_shutdown() -> None:
    stop = threading.Event()
    order: list[str] = []
    informer_synced = threading.Event()

    def comp(name: str, synced: threading.Event | None = None) -> FuncComponent:
        return FuncComponent(
            name,
            lambda _s, _sup: order.append(f"start {name}"),
            (synced.is_set if synced else lambda: True),
            lambda: order.append(f"stop {name}"),
        )

    http = ProcessHTTPServer("127.0.0.1", 0, CollectorRegistry())
    daemon = Daemon(
        [comp("executor"), comp("informer", informer_synced), comp("qos")],
        Supervisor(stop),
        http,
        sync_timeout=10,
    )
    code: list[int] = []
    t = threading.Thread(target=lambda: code.append(daemon.run(stop)))
    t.start()
    base = f"http://127.0.0.1:{http.port}"
    assert wait_for(lambda: "start informer" in order, threading.Event(), timeout=3)
    assert get(base + "/healthz") == (200, "ok\n")
    status, body = get(base + "/readyz")
    assert status == 503 and "informer" in body
    assert "start qos" not in order  # waits for the informer to sync
    informer_synced.set()
    assert daemon.ready.wait(3)
    assert get(base + "/readyz")[0] == 200
    assert get(base + "/metrics")[0] == 200
    stop.set()
    t.join(5)
    assert code == [0]
    assert order == [
        "start executor",
        "start informer",
        "start qos",
        "stop qos",
        "stop informer",
        "stop executor",
    ]


def _starts_after_a_slow_sync(must_sync: bool, caplog: pytest.LogCaptureFixture) -> tuple[bool, bool]:
    """A component that syncs only when the test says, past a 0.05 s sync timeout: whether the next one
    had started, and whether the process was ready, by 0.5 s."""
    stop = threading.Event()
    synced = threading.Event()
    order: list[str] = []
    daemon = Daemon(
        [
            FuncComponent("informers", lambda _s, _sup: None, synced.is_set, must_sync=must_sync),
            FuncComponent("work", lambda _s, _sup: order.append("work")),
        ],
        Supervisor(stop),
        None,
        sync_timeout=0.05,
    )
    t = threading.Thread(target=daemon.run, args=(stop,))
    with caplog.at_level(logging.WARNING, logger="koordshared.runtime.lifecycle"):
        t.start()
        time.sleep(0.5)
        early = (order == ["work"], daemon.ready.is_set())
        synced.set()
        assert wait_for(daemon.ready.is_set, threading.Event(), timeout=3)
        stop.set()
        t.join(5)
    assert order == ["work"] and not t.is_alive()
    return early


def test_a_component_that_must_sync_holds_the_next_past_the_sync_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert _starts_after_a_slow_sync(True, caplog) == (False, False)
    waits = [r.getMessage() for r in caplog.records if "still waiting" in r.getMessage()]
    # reported each timeout
    assert "after 0.05s; still waiting" in waits[0] and "after 0.1s; still waiting" in waits[1]


def test_without_must_sync_the_next_component_starts_after_the_sync_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert _starts_after_a_slow_sync(False, caplog) == (True, True)
    assert any("going on" in r.getMessage() for r in caplog.records)


def test_daemon_exits_non_zero_when_a_root_component_dies() -> None:
    stop = threading.Event()
    sup = Supervisor(stop)

    def start(_s: threading.Event, s: Supervisor) -> None:
        s.go("collector", lambda: (_ for _ in ()).throw(OSError("disk gone")))

    daemon = Daemon([FuncComponent("advisor", start)], sup, None)
    assert daemon.run(stop) == 1


def test_ticks_of_one_period_share_a_thread_in_order_and_one_failing_spares_the_others() -> None:
    stop = threading.Event()
    sup = Supervisor(stop)
    calls: list[str] = []
    errors: list[str] = []
    timings: dict[str, list[tuple[float, float]]] = {"a": [], "b": []}

    def a() -> None:
        calls.append("a")
        time.sleep(0.02)
        raise RuntimeError("a broke")

    def b() -> None:
        calls.append("b")
        if calls.count("b") >= 3:
            stop.set()

    def timing(name: str, took: float, late: float) -> None:
        timings[name].append((took, late))

    ticks = [
        Tick("a", a, on_error=lambda n, _e: errors.append(n), on_tick=timing),
        Tick("b", b, on_tick=timing),
    ]
    thread = sup.every_all("both", 0.05, ticks)
    assert sup.join(time.monotonic() + 5.0) == [] and not sup.failed
    assert calls == ["a", "b"] * 3 and errors == ["a"] * 3
    assert thread.name == "both" and len({t.name for t in sup.threads}) == 1
    # b starts after a: its lateness includes a's 20 ms
    assert all(late >= 0.015 for _took, late in timings["b"]) and len(timings["a"]) == 3
