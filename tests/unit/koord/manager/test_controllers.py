"""koord-manager's controllers against the test API server: Koordinator's reconcile table for NodeMetric and
NodeSLO, the config cache (selectors, config changes, a broken ConfigMap), the agent's status left alone,
and batch resources written into the node status."""

from __future__ import annotations

import time
from typing import Any

from koordshared.apis.meta.quantity import format_time
from koordshared.apis.slo.nodemetric import CollectPolicy
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.managerharness import (
    NS,
    Running,
    get,
    node,
    running_manager,
    set_config,
    wait_until,
)

DEFAULT_NM_SPEC = CollectPolicy().to_spec()


def settled(m: Running) -> bool:
    """Every controller's queue is empty and no key is being reconciled (delayed keys aside)."""
    return all(c.queue.idle() for c in m.manager.controllers.values())


def nm_spec(server: APIServer, name: str) -> Any:
    obj = get(server, "nodemetrics", name)
    return None if obj is None else obj.get("spec")


def slo_spec(server: APIServer, name: str) -> Any:
    obj = get(server, "nodeslos", name)
    return None if obj is None else obj.get("spec")


def test_one_nodemetric_and_nodeslo_per_node_created_and_deleted(api_server: APIServer) -> None:  # noqa: F811
    store = api_server.store
    store.create("nodes", node("a"))
    store.create(
        "nodemetrics",
        {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": "orphan"}},
    )
    with running_manager(api_server) as m:
        wait_until(
            lambda: nm_spec(api_server, "a") == DEFAULT_NM_SPEC and slo_spec(api_server, "a") is not None
        )
        wait_until(lambda: get(api_server, "nodemetrics", "orphan") is None, what="orphan deleted")
        store.create("nodes", node("b"))
        wait_until(lambda: nm_spec(api_server, "b") is not None and slo_spec(api_server, "b") is not None)
        store.delete("nodes", "a")
        wait_until(
            lambda: get(api_server, "nodemetrics", "a") is None and get(api_server, "nodeslos", "a") is None
        )
        assert slo_spec(api_server, "b")["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 65

        def count(reason: str) -> float:
            return m.metric("slo_controller_nodemetric_reconcile_count", status="succeeded", reason=reason)

        wait_until(lambda: count("createNodeMetric") == 2 and count("deleteNodeMetric") == 2, what="counters")
        assert m.metric("koord_manager_reconciles_total", controller="nodeslo", result="success") >= 3
        assert (
            m.metric(
                "koord_manager_api_writes_total", controller="nodemetric", verb="create", result="conflict"
            )
            == 0
        )


def test_colocation_config_selectors_changes_and_agent_status(api_server: APIServer) -> None:  # noqa: F811
    store = api_server.store
    set_config(
        api_server,
        colocation_config={
            "enable": True,
            "metricReportIntervalSeconds": 30,
            "nodeConfigs": [
                {
                    "name": "gpu",
                    "nodeSelector": {"matchLabels": {"pool": "gpu"}},
                    "metricReportIntervalSeconds": 10,
                }
            ],
        },
    )
    store.create("nodes", node("plain"))
    store.create("nodes", node("gpu-1", {"pool": "gpu"}))

    def interval(name: str) -> Any:
        spec = nm_spec(api_server, name)
        return spec and spec["metricCollectPolicy"]["reportIntervalSeconds"]

    with running_manager(api_server):
        wait_until(lambda: interval("plain") == 30 and interval("gpu-1") == 10, what="strategies applied")
        # The agent reports status through the status subresource; spec changes must leave it alone.
        status = {
            "updateTime": "2026-01-01T00:00:00Z",
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1"}}},
        }
        store.patch("nodemetrics", "plain", {"status": status}, subresource="status")
        store.patch("nodes", "plain", {"metadata": {"labels": {"pool": "gpu"}}})  # relabel: now matches
        wait_until(lambda: interval("plain") == 10, what="relabelled node re-specced")
        assert get(api_server, "nodemetrics", "plain")["status"] == status  # type: ignore[index]
        set_config(api_server, colocation_config={"enable": True, "metricReportIntervalSeconds": 45})
        wait_until(
            lambda: interval("plain") == 45 and interval("gpu-1") == 45,
            what="config change re-specs every node",
        )
        assert get(api_server, "nodemetrics", "plain")["status"] == status  # type: ignore[index]


def test_broken_configmap_keeps_last_good_specs_and_warns(api_server: APIServer) -> None:  # noqa: F811
    store = api_server.store
    set_config(
        api_server,
        colocation_config={"enable": True, "metricReportIntervalSeconds": 20},
        resource_threshold_config={"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 55}},
    )
    store.create("nodes", node("a"))

    def state() -> tuple[Any, Any]:
        nm, slo = nm_spec(api_server, "a"), slo_spec(api_server, "a")
        return (
            nm and nm["metricCollectPolicy"]["reportIntervalSeconds"],
            slo and slo["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"],
        )

    with running_manager(api_server) as m:
        wait_until(lambda: state() == (20, 55))
        cm = store.get("configmaps", "slo-controller-config", NS)
        cm["data"]["colocation-config"] = '{"enable": true, "metricReportIntervalSeconds": '  # truncated JSON
        cm["data"]["resource-threshold-config"] = '{"clusterStrategy": {"cpuSuppressThresholdPercent": 500}}'
        store.update("configmaps", cm)

        def warned() -> set[str]:
            events, _ = store.list("events", NS)
            return {e["reason"] for e in events if e["type"] == "Warning"}

        wait_until(
            lambda: {"ColocationCfgUnmarshalFailed", "SLOCfgUnmarshalFailed"} <= warned(),
            what="Warning Events",
        )
        store.create("nodes", node("b"))  # a node created meanwhile gets the last good specs too
        wait_until(lambda: nm_spec(api_server, "b") is not None and slo_spec(api_server, "b") is not None)
        # The broken ConfigMap was handled before its Warning Events: whatever it queued is done once the
        # controllers are idle with b written.
        wait_until(lambda: settled(m), what="controllers idle")
        assert state() == (20, 55)
        assert slo_spec(api_server, "b")["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 55
        assert m.metric("koord_manager_config_errors_total", key="colocation-config") >= 1


def nodemetric_status(update_wall: float, prod_cpu: str) -> dict[str, Any]:
    return {
        "updateTime": format_time(update_wall),
        "nodeMetric": {
            "nodeUsage": {"resources": {"cpu": "2", "memory": "4Gi"}},
            "systemUsage": {"resources": {"cpu": "0", "memory": "0"}},
        },
        "podsMetric": [
            {
                "namespace": "default",
                "name": "web",
                "priority": "koord-prod",
                "qos": "LS",
                "podUsage": {"resources": {"cpu": prod_cpu, "memory": "4Gi"}},
            }
        ],
    }


def batch(server: APIServer, name: str) -> tuple[Any, Any, Any]:
    n = get(server, "nodes", name) or {}
    alloc, cap = n.get("status", {}).get("allocatable", {}), n.get("status", {}).get("capacity", {})
    return (
        alloc.get("kubernetes.io/batch-cpu"),
        alloc.get("kubernetes.io/batch-memory"),
        cap.get("kubernetes.io/batch-cpu"),
    )


def test_batch_resources_follow_the_nodemetric(api_server: APIServer) -> None:  # noqa: F811
    # 16 cores, reclaim 60% -> margin 6400m; system 0 and no kubelet reservation; prod pod usage u:
    # batch-cpu = 16000 - 6400 - u. Memory: 32Gi - int(32Gi * 0.35) - 4Gi = 18038862644.
    store = api_server.store
    set_config(
        api_server,
        colocation_config={"enable": True, "degradeTimeMinutes": 1, "updateTimeThresholdSeconds": 4},
    )
    store.create("nodes", node("n"))
    store.create(
        "pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default", "labels": {"koordinator.sh/qosClass": "LS"}},
            "spec": {
                "nodeName": "n",
                "containers": [
                    {"name": "c", "image": "app", "resources": {"requests": {"cpu": "4", "memory": "4Gi"}}}
                ],
            },
            "status": {"phase": "Running"},
        },
    )
    with running_manager(api_server) as m:
        wait_until(lambda: get(api_server, "nodemetrics", "n") is not None)
        assert batch(api_server, "n") == (None, None, None)  # never reported: nothing to lend
        store.patch("nodemetrics", "n", {"status": nodemetric_status(time.time(), "2")}, subresource="status")
        wait_until(lambda: batch(api_server, "n")[0] is not None, what="batch resources written")
        assert batch(api_server, "n") == ("7600", "18038862644", "7600")

        def node_writes() -> float:
            return m.metric(
                "slo_controller_node_resource_reconcile_count", status="succeeded", reason="updateNodeStatus"
            )

        def echoed(cpu: str) -> bool:
            """The manager's node cache holds its write and every queue is idle."""
            cached = m.manager.nodes.get("n") or {}
            alloc = cached.get("status", {}).get("allocatable", {})
            return alloc.get("kubernetes.io/batch-cpu") == cpu and settled(m)

        wait_until(lambda: echoed("7600"), what="the first write echoed")
        # Prod usage up 3 cores -> batch down 3 cores (a 39% move: past the 10% diff threshold).
        store.patch("nodemetrics", "n", {"status": nodemetric_status(time.time(), "5")}, subresource="status")
        wait_until(lambda: batch(api_server, "n")[0] == "4600", what="batch down")
        wait_until(lambda: echoed("4600"), what="the second write echoed")
        # A write may be sent twice when a NodeMetric change is reconciled against the node before the
        # echo of the last write (as any controller working from an informer cache): count from here.
        writes = node_writes()
        # A 100m move (2%) is under the 10% diff threshold: not written now...

        def reconciles() -> float:
            return m.metric("koord_manager_reconciles_total", controller="noderesource", result="success")

        before = reconciles()
        rv = store.patch(
            "nodemetrics", "n", {"status": nodemetric_status(time.time(), "5100m")}, subresource="status"
        )["metadata"]["resourceVersion"]
        cached = m.manager.nodemetrics
        wait_until(
            lambda: (
                (cached.get("n") or {}).get("metadata", {}).get("resourceVersion") == rv
                and reconciles() > before
                and settled(m)
            ),
            what="the small change reconciled",
        )
        assert batch(api_server, "n")[0] == "4600"
        assert node_writes() == writes
        # ... until updateTimeThresholdSeconds (4 s; 2 s was sometimes over before the small change was
        # reconciled on a loaded machine) have passed since the last write: then it is.
        wait_until(
            lambda: batch(api_server, "n")[0] == "4500", timeout=6, what="small change after the period"
        )
        # The agent stops reporting: after degradeTimeMinutes the resources are withdrawn.
        store.patch(
            "nodemetrics", "n", {"status": nodemetric_status(time.time() - 59, "5")}, subresource="status"
        )
        wait_until(lambda: batch(api_server, "n") == (None, None, None), timeout=5, what="degraded to zero")
        assert get(api_server, "nodes", "n")["status"]["allocatable"]["cpu"] == "16"  # type: ignore[index]


def test_a_nodemetric_without_node_usage_lends_nothing(api_server: APIServer) -> None:  # noqa: F811
    # An agent's report before its first sample: fresh updateTime, empty nodeUsage and systemUsage.
    empty = {
        "updateTime": None,
        "nodeMetric": {"nodeUsage": {"resources": None}, "systemUsage": {"resources": None}},
        "podsMetric": None,
    }
    store = api_server.store
    set_config(api_server, colocation_config={"enable": True, "degradeTimeMinutes": 10})
    store.create("nodes", node("n"))
    with running_manager(api_server) as m:
        wait_until(lambda: get(api_server, "nodemetrics", "n") is not None)

        def reconciled(rv: str) -> bool:
            cached = m.manager.nodemetrics.get("n") or {}
            return cached.get("metadata", {}).get("resourceVersion") == rv and settled(m)

        def report(status: dict[str, Any]) -> None:
            rv = store.patch("nodemetrics", "n", {"status": status}, subresource="status")["metadata"]
            wait_until(lambda: reconciled(rv["resourceVersion"]), what="the report reconciled")

        report({**empty, "updateTime": format_time(time.time())})
        assert batch(api_server, "n") == (None, None, None), "an idle-looking node lends nothing"
        store.patch("nodemetrics", "n", {"status": nodemetric_status(time.time(), "2")}, subresource="status")
        wait_until(lambda: batch(api_server, "n")[0] == "7600", what="batch resources from a real report")
        report({**empty, "updateTime": format_time(time.time())})
        wait_until(lambda: batch(api_server, "n") == (None, None, None), what="degraded: no usage")
