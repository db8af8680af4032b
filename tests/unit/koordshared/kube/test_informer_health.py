"""The informer's health signal: ``healthy()`` and ``on_health`` say when the cache stops following the
server (an outage, a 5xx) and when it follows it again (a list or a watch answered), without a re-list
when the watch can resume from its resourceVersion. The agent's pod source is degraded by it."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from koordshared.kube.informer import Informer
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.unit.koordshared.kube.test_informer import Recorder, node, running, wait  # noqa: F401


class Transitions:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[bool] = []

    def __call__(self, ok: bool) -> None:
        with self.lock:
            self.seen.append(ok)

    def get(self) -> list[bool]:
        with self.lock:
            return list(self.seen)


@pytest.mark.parametrize("mode", ["refuse", "503"])
def test_outage_turns_unhealthy_and_a_resumed_watch_healthy_again(
    api_server: APIServer,  # noqa: F811
    running: Callable[..., Informer],  # noqa: F811
    mode: str,
) -> None:
    api_server.down(mode)  # not even the first list is answered
    health = Transitions()
    rec = Recorder()
    errors: list[BaseException] = []
    inf = running("nodes", rec, request_timeout=1.0, on_health=health, on_error=errors.append)
    wait(lambda: len(errors) >= 1)  # it tried and failed
    assert not inf.healthy() and not inf.has_synced() and health.get() == []
    api_server.up()
    # The hook runs right after the flag flips, in the informer's thread: wait for what is asserted.
    wait(lambda: health.get() == [True])
    assert inf.healthy() and inf.has_synced()

    api_server.store.wait_for_watchers(1)
    api_server.down(mode)
    wait(lambda: health.get() == [True, False])
    assert not inf.healthy()
    api_server.store.create("nodes", node("during-outage"))
    api_server.up()
    wait(lambda: health.get() == [True, False, True])
    assert inf.healthy()
    wait(lambda: ("add", "during-outage") in rec.seen())
    assert inf.lists == 1  # healthy again from the resumed watch, not from a re-list


def test_expired_version_relists_while_healthy_and_a_failing_hook_is_contained(
    api_server: APIServer,  # noqa: F811
    running: Callable[..., Informer],  # noqa: F811
) -> None:
    calls: list[bool] = []

    def hook(ok: bool) -> None:
        calls.append(ok)
        raise RuntimeError("a broken hook")

    inf = running("nodes", watch_timeout=1.5, on_health=hook)
    wait(inf.healthy)
    api_server.store.wait_for_watchers(1)
    api_server.fail_next(1, 410, method="GET", path_contains="/nodes")  # the next watch: Gone
    api_server.store.create("nodes", node("a"))
    wait(lambda: inf.lists == 2)
    wait(lambda: inf.get("a") is not None)
    # A 410 is an answer: the informer re-lists at once and never stopped following the server.
    assert inf.healthy() and calls == [True]


def test_a_watch_ended_at_once_is_retried_after_a_backoff(
    api_server: APIServer,  # noqa: F811
    running: Callable[..., Informer],  # noqa: F811
) -> None:
    errors: list[BaseException] = []
    inf = running("nodes", on_error=errors.append)
    wait(inf.healthy)
    api_server.store.wait_for_watchers(1)
    api_server.store.close_watchers()  # this watch and every new one end at once, without an event
    try:
        wait(lambda: len(errors) >= 3)
        assert not inf.healthy()
        # a hot loop would have re-watched hundreds of times by now; the backoff (0.2 s, doubling) allows
        # a handful
        assert inf.watches <= len(errors) + 2, (inf.watches, len(errors))
        assert "VeryShortWatch" in str(errors[-1])
    finally:
        api_server.store.open_watches()
    wait(inf.healthy)
