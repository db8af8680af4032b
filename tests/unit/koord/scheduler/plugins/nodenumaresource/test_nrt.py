"""The NodeResourceTopology the scheduler's tests and benchmarks feed NodeNUMAResource
(:func:`koordshared.testing.topology.node_resource_topology`) is the one the agent reports for the same idle
node: same zones and same annotations, for the 2 sockets x 2 NUMA nodes x hyperthreads topology and for
a one-socket one, so the scheduler's tests run on what a real node publishes (the agent's report is
itself checked against hand-written expectations in
``tests/unit/koordlet/statesinformer/test_node_topology.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koordshared.apis.topology.noderesourcetopology import zones_of
from koordshared.testing.topology import TWO_SOCKETS, SimulatedTopology, node_resource_topology
from tests.unit.koordlet.statesinformer.test_node_topology import informer


def _parsed(annotations: dict[str, str]) -> dict[str, Any]:
    return {k: json.loads(v) for k, v in annotations.items()}


@pytest.mark.parametrize(
    "topo",
    [TWO_SOCKETS, SimulatedTopology(sockets=1, numa_per_socket=1, cores_per_numa=8, threads=2)],
    ids=["two-sockets", "one-socket"],
)
def test_the_test_report_is_the_agents(tmp_path: Path, topo: SimulatedTopology) -> None:
    agent = informer(tmp_path, topo).status()
    assert agent is not None
    fed = node_resource_topology("node-a", topo)
    assert agent.difference(fed) == ""  # the agent would not rewrite it
    assert [z.to_json() for z in zones_of(fed)] == [z.to_json() for z in agent.zones]
    assert fed["topologyPolicies"] == [agent.topology_policy]
    assert _parsed(fed["metadata"]["annotations"]) == _parsed(dict(agent.annotations))
