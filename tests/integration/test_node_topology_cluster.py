"""The node topology report in a cluster: the agent's NodeResourceTopology on the in-repo API server (valid
against the CRD we ship), from a simulated 2-socket host (``koordlet.testing.sysfs``) and the kubelet's
``/configz``; updated when a pod's bound CPUs leave the share pools, not rewritten while nothing changes,
and what other components put on the object kept."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from koordlet.testing.kubelet import FakeKubelet, pod_object
from koordlet.testing.sysfs import write_topology
from koordshared.apis.topology import noderesourcetopology as nrt
from koordshared.runtime.lifecycle import wait_for
from koordshared.testing.topology import TWO_SOCKETS
from tests import crdschema
from tests.apiserver.manifests import NRT_CRD
from tests.integration.cluster import NEVER, NODE, Cluster, pods_on


def test_node_topology_report(
    cluster_factory: Callable[..., Cluster], fake_host: Any, tmp_path: Path
) -> None:
    paths = write_topology(tmp_path, TWO_SOCKETS)
    fake_host.with_paths(var_lib_kubelet=paths.var_lib_kubelet)
    kubelet = FakeKubelet().start()
    kubelet.configz = {
        "kubeletconfig": {
            "cpuManagerPolicy": "none",
            "topologyManagerPolicy": "single-numa-node",
            "topologyManagerScope": "pod",
        }
    }
    c = cluster_factory(kubelet=kubelet, node_topology_sync_interval=0.2)
    store = c.server.store

    def obj() -> dict[str, Any] | None:
        try:
            return store.get("noderesourcetopologies", NODE)
        except Exception:
            return None

    assert wait_for(lambda: obj() is not None, NEVER, timeout=10)
    got = obj()
    assert got is not None
    crdschema.validate(got, NRT_CRD, version="v1alpha1")
    node_uid = store.get("nodes", NODE)["metadata"]["uid"]
    assert got["metadata"]["ownerReferences"][0]["uid"] == node_uid
    assert got["topologyPolicies"] == ["SingleNUMANodePodLevel"]
    assert [z["name"] for z in got["zones"]] == ["node-0", "node-1", "node-2", "node-3"]
    pools = json.loads(got["metadata"]["annotations"][nrt.ANNOTATION_CPU_SHARED_POOLS])
    assert [p["cpuset"] for p in pools] == ["0-1,8-9", "2-3,10-11", "4-5,12-13", "6-7,14-15"]

    # someone else's annotation on the object survives the agent's updates
    store.patch("noderesourcetopologies", NODE, {"metadata": {"annotations": {"example.com/note": "kept"}}})
    # an LSR pod bound to NUMA node 0's first core: the pools lose those CPUs
    lsr = pod_object(
        "00000000-0000-4000-8000-0000000000aa",
        "lsr",
        node=NODE,
        qos_class="Guaranteed",
        labels={"koordinator.sh/qosClass": "LSR"},
    )
    lsr["metadata"]["annotations"] = {"scheduling.koordinator.sh/resource-status": '{"cpuset":"0,8"}'}
    kubelet.set_pods([*pods_on(), lsr])

    def first_pool() -> str:
        o = obj() or {}
        return json.loads(o["metadata"]["annotations"][nrt.ANNOTATION_CPU_SHARED_POOLS])[0].get("cpuset", "")

    assert wait_for(lambda: first_pool() == "1,9", NEVER, timeout=10)
    assert (obj() or {})["metadata"]["annotations"]["example.com/note"] == "kept"

    # nothing changes: three more rounds write nothing
    def writes() -> int:
        return len([r for r in c.server.requests if r.method == "PUT" and "noderesourcetopologies" in r.path])

    before, syncs = writes(), c.informer.topology.syncs
    assert wait_for(lambda: c.informer.topology.syncs >= syncs + 3, NEVER, timeout=10)
    assert writes() == before
