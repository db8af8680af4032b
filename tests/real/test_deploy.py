"""``deploy/`` on a real kube-apiserver: every manifest applies under strict field validation and applies
again as a no-op (``kubectl diff`` finds nothing, every object ``unchanged``), and its workloads' pod
templates pass admission; what our components write (NodeMetric status, NodeSLO and NodeMetric specs,
NodeResourceTopology, Reservation, PodGroup and ElasticQuota status, Device) is stored exactly as sent:
nothing refused, pruned or rewritten by the CRDs of ``deploy/``."""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from koord.manager.configcache import SLOConfigCache
from koord.manager.nodeowned import nodemetric_spec, nodeslo_spec
from koord.scheduler.plugins.elasticquota.quotas import built_in_object
from koord.scheduler.plugins.elasticquota.status import status_patch
from koordshared.apis.extension import elasticquota as eq
from koordshared.apis.meta.groups import (
    DEVICES,
    ELASTIC_QUOTAS,
    NODE_METRICS,
    NODE_RESOURCE_TOPOLOGIES,
    NODE_SLOS,
    NODES,
    PODGROUPS,
    RESERVATIONS,
)
from koordshared.apis.slo.nodemetric import NodeMetricStatus, to_status
from koordshared.kube.client import ApiError
from tests.real import manifests
from tests.real import written_scheduler as sched
from tests.real.objects import get, slo_config
from tests.real.strictapi import MERGE_PATCH, StrictAPI, TopologySinkToServer, merged, written_part
from tests.real.written import FULL_COLLECT_POLICY, FULL_STRATEGIES, slo_keys_for_node, topology_reporter
from tests.realcluster.cluster import Cluster
from tests.realcluster.hollow import HollowNode
from tests.realcluster.procs import wait_until
from tests.realcluster.stack import NAMESPACE
from tests.unit.koordlet.statesinformer.test_nodemetric_shape import WALL, full_status

HOLLOW = "deploy-fields-0"
FIELDS_NS = "deploy-fields"
Obj = dict[str, Any]

# ---- every manifest of deploy/ ----------------------------------------------------------------------


@pytest.fixture(scope="class")
def applied(cluster: Cluster) -> Iterator[manifests.Applied]:
    """deploy/ applied once for the class; what the apply created is deleted when its tests are done."""
    with manifests.applied(cluster) as done:
        yield done


class TestEveryManifest:
    """Every API object of deploy/, applied once for the class."""

    def test_every_manifest_applies_with_strict_validation(self, applied: manifests.Applied) -> None:
        # Proves against: kube-apiserver's strict field validation of every built-in kind and CRD of deploy/.
        out = applied.result
        assert out.returncode == 0, out.stderr
        assert len(out.stdout.splitlines()) == len(applied.docs), out.stdout
        assert "Warning" not in out.stderr, out.stderr
        print(f"{len(applied.docs)} objects of deploy/ applied in {applied.seconds:.1f} s")

    def test_applying_again_changes_nothing(self, cluster: Cluster, applied: manifests.Applied) -> None:
        # Proves against: kube-apiserver's defaulting and storage (kubectl diff compares a server-side dry run
        # with the live objects), then kubectl's three-way merge against what the server stored.
        assert applied.result.returncode == 0
        stream = manifests.stream(applied.docs)
        diff = manifests.kubectl(cluster, "diff", "-f", "-", stdin=stream)
        assert diff.returncode == 0, diff.stdout + diff.stderr
        again = manifests.kubectl(cluster, "apply", "--validate=strict", "-f", "-", stdin=stream)
        assert again.returncode == 0, again.stderr
        lines = again.stdout.splitlines()
        assert [ln for ln in lines if not ln.endswith(" unchanged")] == [] and len(lines) == len(applied.docs)

    def test_workload_pod_templates_pass_admission(
        self, cluster: Cluster, applied: manifests.Applied
    ) -> None:
        # Proves against: kube-controller-manager's Deployment, ReplicaSet and DaemonSet controllers creating
        # each workload's pods through kube-apiserver's admission (ServiceAccount, Priority, pod validation).
        assert applied.result.returncode == 0
        workloads = [d for _, d in applied.docs if d["kind"] in manifests.WORKLOADS]
        names = {w["metadata"]["name"] for w in workloads}
        assert names == {
            "koordlet",
            "koord-manager",
            "koord-scheduler",
            "koord-descheduler",
            "koord-scheduler-extender",
        }
        short: list[str] = []

        def created() -> bool:
            short[:] = manifests.without_all_pods(cluster, workloads)
            return not short

        with contextlib.suppress(TimeoutError):
            wait_until("every workload's pods created", created, 90, every=1)
        refused = manifests.kubectl(
            cluster, "get", "events", "-n", NAMESPACE, "--field-selector=reason=FailedCreate"
        )
        assert short == [], f"{short}\n{refused.stdout}"
        print(f"{len(workloads)} workloads made their pods (the images cannot be pulled here)")


def test_the_example_node_slo_is_accepted_as_written(cluster: Cluster) -> None:
    # Proves against: kube-apiserver's NodeSLO CRD under strict validation, in a server-side dry run:
    # koord-manager owns every NodeSLO (deletes one without a Node, rewrites the others from its
    # ConfigMap), so the example is not left on the cluster.
    example = yaml.safe_load(manifests.EXAMPLE_NODESLO.read_text())
    out = cluster.kubectl(
        "apply", "--dry-run=server", "--validate=strict", "-o", "json", "-f", str(manifests.EXAMPLE_NODESLO)
    )
    assert json.loads(out)["spec"] == example["spec"]


# ---- what our components write ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> StrictAPI:
    return StrictAPI(cluster.admin_kubeconfig)


@pytest.fixture(scope="module")
def hollow(cluster: Cluster, api: StrictAPI) -> Iterator[Obj]:
    """A Node of the test's own, without a kubelet (tainted: nothing lands there), for which koord-manager
    makes a NodeMetric and a NodeSLO as for any node; the Node, and so they, are deleted afterwards."""
    node = HollowNode(HOLLOW, cluster.kubectl)
    node.create()
    try:
        wait_until(
            "koord-manager's NodeMetric and NodeSLO for the test's node",
            lambda: api.get_or_none(NODE_METRICS.path(HOLLOW)) and api.get_or_none(NODE_SLOS.path(HOLLOW)),
            60,
            every=1,
        )
        yield api.get(NODES.path(HOLLOW))
    finally:
        node.delete()
        api.delete(NODE_RESOURCE_TOPOLOGIES.path(HOLLOW))
        api.delete(DEVICES.path(HOLLOW))
        gone = (NODES, NODE_METRICS, NODE_SLOS, NODE_RESOURCE_TOPOLOGIES, DEVICES)
        wait_until(
            "the test's node and its objects gone",
            lambda: all(api.get_or_none(r.path(HOLLOW)) is None for r in gone),
            60,
            every=1,
        )


@pytest.fixture(scope="module")
def namespace(cluster: Cluster) -> Iterator[str]:
    cluster.kubectl("create", "namespace", FIELDS_NS)
    yield FIELDS_NS
    cluster.kubectl("delete", "namespace", FIELDS_NS, "--wait=true", "--timeout=120s")


def put_status(api: StrictAPI, path: str, body_of: Callable[[Obj], Obj]) -> None:
    """A PUT built from the object as read, read again after a conflict (as the agent retries)."""
    for attempt in range(3):
        try:
            api.write("PUT", path, body_of(api.get(path.removesuffix("/status"))))
            return
        except ApiError as err:
            if not err.conflict or attempt == 2:
                raise


def patch_and_compare(
    api: StrictAPI,
    path: str,
    build: Callable[[Obj], Mapping[str, Any] | None],
    subresource: str = "",
    defaults: Obj | None = None,
) -> Obj:
    """Send the merge patch the plugin builds from the stored object, as it does; the server's answer must
    be exactly that object with the patch (and the CRD's ``defaults`` where the object has no value).
    Our own koord-scheduler runs beside the test and its controllers serve every such object, as
    Koordinator's do (a Reservation whatever its scheduler): when one of them writes between the read
    and the patch (409 on a patch that carries the resourceVersion, or another writer's fields in the
    answer), the patch is built again on the object as it is then, as the plugin retries."""
    tries = []
    for _ in range(5):
        current = api.get(path)
        patch = build(current)
        assert patch is not None
        want = written_part(merged(merged(defaults or {}, current), patch))
        try:
            stored = api.write("PATCH", path + subresource, patch, MERGE_PATCH)
        except ApiError as err:
            if not err.conflict:
                raise
            tries.append("409")
            continue
        if written_part(stored) == want:
            return stored
        tries.append(f"stored {written_part(stored)} != {want}")
    raise AssertionError(f"no patch of five read back as sent: {tries}")


def test_node_metric_status_as_the_agent_writes_it(api: StrictAPI, hollow: Obj) -> None:
    # Proves against: kube-apiserver's NodeMetric CRD and its status subresource (the agent's PUT).
    path = NODE_METRICS.path(HOLLOW)
    # The fullest report, then an empty one: the second replaces the first, leaving none of it.
    for status in (to_status(full_status()), to_status(NodeMetricStatus(update_time=WALL))):

        def body(current: Obj, status: Obj = status) -> Obj:
            meta = {k: current["metadata"][k] for k in ("name", "uid", "resourceVersion")}
            return {
                "apiVersion": NODE_METRICS.api_version,
                "kind": NODE_METRICS.kind,
                "metadata": meta,
                "status": status,
            }

        put_status(api, path + "/status", body)
        assert api.get(path)["status"] == status


def test_node_slo_and_node_metric_specs_as_koord_manager_writes_them(
    cluster: Cluster, api: StrictAPI, hollow: Obj
) -> None:
    # Proves against: kube-apiserver's NodeSLO and NodeMetric CRDs storing what the running koord-manager
    # renders for a node whose strategies (slo-controller-config, for this node alone) set every field.
    data = get(cluster, "configmap", "slo-controller-config", ns=NAMESPACE)["data"]
    keys = slo_keys_for_node(data, {"matchLabels": {"kubernetes.io/hostname": HOLLOW}})
    with slo_config(cluster, **{k.replace("-", "_"): v for k, v in keys.items()}):
        cache = SLOConfigCache()
        cache.sync(get(cluster, "configmap", "slo-controller-config", ns=NAMESPACE))
        # The node's own strategies render (not the cluster's): every field is set.
        slo = nodeslo_spec(cache)(hollow, None)
        assert {k: slo[k] for k in FULL_STRATEGIES} == FULL_STRATEGIES
        policy = nodemetric_spec(cache)(hollow, None)["metricCollectPolicy"]
        assert policy["reportIntervalSeconds"] == FULL_COLLECT_POLICY["metricReportIntervalSeconds"]
        for resource, spec_of in ((NODE_SLOS, nodeslo_spec(cache)), (NODE_METRICS, nodemetric_spec(cache))):
            path = resource.path(HOLLOW)
            want = spec_of(hollow, api.get(path))

            def written(path: str = path, want: Obj = want) -> bool:
                return bool(api.get(path)["spec"] == want)

            with contextlib.suppress(TimeoutError):
                wait_until(f"koord-manager's {resource.kind}", written, 30, every=1)
            assert api.get(path)["spec"] == want
            # The manager's own update, now with strict validation: its PUT of the object as read.
            current = api.get(path)
            meta = {k: v for k, v in current["metadata"].items() if k != "managedFields"}
            body = {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": meta, "spec": want}
            assert api.write("PUT", path, body)["spec"] == want
            assert api.get(path)["spec"] == want


def test_node_resource_topology_as_the_agent_reports_it(api: StrictAPI, hollow: Obj, tmp_path: Path) -> None:
    # Proves against: kube-apiserver's NodeResourceTopology CRD (written as v1alpha1, stored as v1alpha2).
    sink = TopologySinkToServer(api, HOLLOW)
    reporter, pods = topology_reporter(tmp_path, HOLLOW, hollow["metadata"]["uid"], sink, sink.current)
    reporter.sync()  # the object is created...
    assert written_part(api.get(sink.path)) == written_part(sink.sent[-1][1])
    pods.pop(0)  # ...and, once the kubelet's exclusive pod has left, replaced
    reporter.sync()
    assert [create for create, _ in sink.sent] == [True, False]
    assert written_part(api.get(sink.path)) == written_part(sink.sent[-1][1])


def test_reservation_as_koord_scheduler_writes_it(api: StrictAPI, hollow: Obj) -> None:
    # Proves against: kube-apiserver's Reservation CRD (spec as a user writes it) and its status
    # subresource taking the scheduler's JSON merge patches with their resourceVersion precondition.
    r = sched.reservation_object("deploy-fields-r", HOLLOW)
    path = RESERVATIONS.path(r["metadata"]["name"])
    try:
        stored = api.write("POST", RESERVATIONS.path(), r)
        assert written_part(stored) == written_part(r)
        # The CRD defaults status.phase to Pending, as Koordinator's does.
        pending = {"status": {"phase": "Pending"}}
        for transition in sched.reservation_transitions(HOLLOW, time.time()):
            stored = patch_and_compare(api, path, transition, "/status", pending)
        assert stored["status"]["phase"] == "Failed"
    finally:
        api.delete(path)


def test_pod_group_status_as_the_coscheduling_controller_writes_it(api: StrictAPI, namespace: str) -> None:
    # Proves against: kube-apiserver's PodGroup CRD (no status subresource: the controller merge-patches
    # the object itself) through a gang's whole life.
    pg = sched.podgroup_object("deploy-fields-g", namespace)
    path = PODGROUPS.path(pg["metadata"]["name"], namespace)
    stored = api.write("POST", PODGROUPS.path(namespace=namespace), pg)
    assert written_part(stored) == written_part(pg)
    for pods, now in sched.podgroup_walk(pg, time.time()):
        stored = patch_and_compare(api, path, functools.partial(sched.podgroup_status, pods=pods, now=now))
    assert set(stored["status"]) == {
        "phase",
        "occupiedBy",
        "scheduled",
        "running",
        "succeeded",
        "failed",
        "scheduleStartTime",
    }


def test_elastic_quota_as_koord_scheduler_writes_it(api: StrictAPI, namespace: str) -> None:
    # Proves against: kube-apiserver's ElasticQuota CRD (no status subresource) storing the quota tree's
    # labels and annotations, the built-in quotas the plugin creates and its figures' merge patches.
    q = sched.quota_object("deploy-fields-q", namespace)
    path = ELASTIC_QUOTAS.path(q["metadata"]["name"], namespace)
    stored = api.write("POST", ELASTIC_QUOTAS.path(namespace=namespace), q)
    assert written_part(stored) == written_part(q)
    for summary in sched.quota_summaries():
        stored = patch_and_compare(api, path, functools.partial(status_patch, summary=summary))
    assert stored["status"]["used"] == {"cpu": "2500m"}
    for name in eq.BUILT_IN:
        built_in = built_in_object(name, namespace, {"cpu": 8000, "memory": 16 << 30})
        assert written_part(
            api.write("POST", ELASTIC_QUOTAS.path(namespace=namespace), built_in)
        ) == written_part(built_in)


def test_device_as_described_for_device_share(api: StrictAPI, hollow: Obj) -> None:
    # Proves against: kube-apiserver's Device CRD (no status subresource) storing every device field.
    d = sched.device_object(HOLLOW)
    stored = api.write("POST", DEVICES.path(), d)
    assert written_part(stored) == written_part(d)
    assert written_part(api.get(DEVICES.path(HOLLOW))) == written_part(d)
