"""koord-manager and koord-descheduler hold the garbage collector while their informers list and freeze the
synced heap when their work starts, as koord-scheduler does (``koordshared.runtime.heap``)."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from koord.descheduler.app import Descheduler, plugin_registry
from koord.descheduler.config import DeschedulerConfig, parse_configuration
from koord.manager.app import Manager
from koordshared.kube.client import make_api_client
from koordshared.kube.process import Address
from koordshared.runtime import heap
from koordshared.runtime.lifecycle import Component, Supervisor
from koordshared.testing import objects
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.managerharness import manager_config, wait_until


@pytest.fixture(autouse=True)
def collector_as_it_was() -> Iterator[tuple[int, int, int]]:
    """The collector's thresholds with no hold in force (an in-process scheduler of another test may have
    left one: the collector is the interpreter's), put back afterwards."""
    heap.settle(collect=False)
    gc.unfreeze()
    thresholds = gc.get_threshold()
    try:
        yield thresholds
    finally:
        heap.settle(collect=False)  # a test that failed while held
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.fixture
def three_nodes(api_server: APIServer) -> APIServer:  # noqa: F811
    for i in range(3):
        api_server.store.create("nodes", objects.node(f"n{i}"))
    return api_server


def check_held_then_settled(components: list[Component], thresholds: tuple[int, int, int]) -> None:
    stop = threading.Event()
    sup = Supervisor(stop)
    first, *_, last = components
    gc.unfreeze()
    try:
        first.start(stop, sup)
        assert gc.get_threshold()[0] == heap.HOLD_THRESHOLD  # the lists decode under a held collector
        wait_until(first.has_synced, 10, "informers synced")
        assert gc.get_threshold()[0] == heap.HOLD_THRESHOLD and gc.get_freeze_count() == 0
        last.start(stop, sup)
        assert gc.get_threshold() == thresholds and gc.get_freeze_count() > 0  # the synced caches frozen
    finally:
        stop.set()
        for component in reversed(components):
            component.shutdown()
        alive = sup.join(time.monotonic() + 10)
    assert alive == []


def test_koord_manager_holds_the_collector_until_its_caches_are_synced(
    three_nodes: APIServer,
    collector_as_it_was: tuple[int, int, int],
) -> None:
    manager = Manager(manager_config(three_nodes), CollectorRegistry())
    try:
        check_held_then_settled(manager.components(), collector_as_it_was)
    finally:
        manager.close()


def test_koord_descheduler_holds_the_collector_until_its_caches_are_synced(
    three_nodes: APIServer,
    collector_as_it_was: tuple[int, int, int],
) -> None:
    cfg = DeschedulerConfig(
        addr=Address("127.0.0.1", 0),
        configuration=parse_configuration({"deschedulingInterval": "1h"}),
        leader_election=False,
    )
    api = make_api_client(client_configuration=three_nodes.client_config())
    app = Descheduler(
        cfg, CollectorRegistry(), api_client=api, plugins=plugin_registry(entry_points=lambda: [])
    )
    try:
        check_held_then_settled(app.components(), collector_as_it_was)
    finally:
        app.close()
