"""NodeNUMAResource in the real ``koord-scheduler`` process against the test API server (with the
NodeResourceTopology CRD the agent's reports are checked against): LSR pods bound on whole cores of a
reported 2-socket node, their ``resource-status`` read back with the agent's parser; a node without a
report named as such in the pod's FailedScheduling event, then taken as soon as its report is created
(the NodeResourceTopology watch requeues the pod); and ``deploy/scheduler/nodenumaresource-rbac.yaml``
grants exactly the plugin's own API traffic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from koordlet.testing.wait import wait_until
from koordshared.apis.extension.numa import resource_status
from koordshared.testing import objects
from koordshared.testing.topology import TWO_SOCKETS, node_resource_topology
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server  # noqa: F401
from tests.cluster.koordscheduler import KoordSchedulerProcess, configuration, events_for, node_of
from tests.support.paths import ROOT
from tests.support.scheduler.numakit import lsr, profile
from tests.unit.deploy.test_rbac import READ_VERBS, allows, attributes, granted

pytestmark = pytest.mark.slow

DEPLOY = ROOT / "deploy" / "scheduler"
NOT_REPORTED = "node(s) CPU Topology not found (no NodeResourceTopology reported)"


def create_pod(server: APIServer, pod: dict[str, Any]) -> None:
    meta = {k: v for k, v in pod["metadata"].items() if k != "uid"}
    server.store.create("pods", {**pod, "metadata": meta})


def cpuset(server: APIServer, name: str) -> frozenset[int]:
    annotations = server.store.get("pods", name, "default")["metadata"].get("annotations") or {}
    return resource_status(annotations).cpus


def test_nodenumaresource_in_the_process(api_server: APIServer, tmp_path: Path) -> None:  # noqa: F811
    server = api_server
    for name in ("a", "bare"):
        server.store.create("nodes", objects.node(name, "16", "64Gi"))
    server.store.create("noderesourcetopologies", node_resource_topology("a", TWO_SOCKETS))
    before = len(server.requests)
    proc = KoordSchedulerProcess(tmp_path, server, configuration(profile()))
    try:
        assert proc.ready(), proc.log()[-3000:]
        create_pod(server, lsr("p1", "4"))
        create_pod(server, lsr("p2", "2", spec={"preferredCPUBindPolicy": "SpreadByPCPUs"}))
        assert wait_until(lambda: node_of(server, "p1") and node_of(server, "p2"), 30), proc.log()[-3000:]
        assert (node_of(server, "p1"), node_of(server, "p2")) == ("a", "a")
        assert cpuset(server, "p1") == {0, 1, 8, 9}  # NUMA node 0, whole cores
        assert cpuset(server, "p2") == {4, 5}  # one thread of two cores, on the emptier socket

        # 14 CPUs: node a has 10 left, and "bare" has no topology report (yet)
        create_pod(server, lsr("big", "14"))
        assert wait_until(lambda: events_for(server, "big", "FailedScheduling"), 30), proc.log()[-3000:]
        message = events_for(server, "big", "FailedScheduling")[0]["message"]
        assert f"1 {NOT_REPORTED}" in message and "1 Insufficient cpu" in message, message
        server.store.create("noderesourcetopologies", node_resource_topology("bare", TWO_SOCKETS))
        assert wait_until(lambda: node_of(server, "big") == "bare", 30), proc.log()[-3000:]
        assert len(cpuset(server, "big")) == 14
    finally:
        assert proc.stop() == 0, proc.log()[-3000:]
    traffic = {attributes(r) for r in server.requests[before:] if "/noderesourcetopologies" in r.path}
    role = [d for d in yaml.safe_load_all((DEPLOY / "nodenumaresource-rbac.yaml").read_text()) if d]
    (cluster_role,) = [d for d in role if d["kind"] == "ClusterRole"]
    rules = cluster_role["rules"]
    assert traffic, "the plugin read no NodeResourceTopology"
    assert sorted((a.verb, a.resource) for a in traffic if not allows(rules, a)) == []
    unused = sorted(
        (a.verb, a.resource) for a in granted(rules) if a not in traffic and a.verb not in READ_VERBS
    )
    assert unused == []
    (binding,) = [d for d in role if d["kind"] == "ClusterRoleBinding"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "koord-scheduler", "namespace": "koordinator-system"}
    ]
