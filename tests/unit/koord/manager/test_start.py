"""koord-manager's start against the test API server: its controllers wait for every cache, however long
the lists take (kube's ``WaitForCacheSync`` has no deadline), since a node cache listed in part would make
every NodeMetric and NodeSLO of a node not yet listed an orphan to delete."""

from __future__ import annotations

import logging

import pytest

from koordshared.apis.slo.nodemetric import CollectPolicy
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.managerharness import get, node, running_manager, wait_until


def test_nothing_is_written_before_the_node_cache_is_synced(
    api_server: APIServer,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    api_server.store.create("nodes", node("n1"))
    spec = CollectPolicy().to_spec()
    api_server.store.create(
        "nodemetrics",
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": "n1"},
            "spec": spec,
        },
    )
    api_server.fail_next(4, 403, method="GET", path_contains="/api/v1/nodes")  # the list refused 4 times
    with (
        caplog.at_level(logging.WARNING, logger="koordshared.runtime.lifecycle"),
        running_manager(api_server, sync_timeout=0.2, synced=False) as m,
    ):
        wait_until(lambda: "still waiting" in caplog.text, 10, "the start reporting its wait")
        assert "going on" not in caplog.text and not m.manager.informers_synced()
        wait_until(lambda: get(api_server, "nodeslos", "n1") is not None, 20, "n1's NodeSLO once synced")
    assert [r.path for r in api_server.requests if r.method == "DELETE"] == []  # n1's NodeMetric kept
    assert get(api_server, "nodemetrics", "n1") is not None
