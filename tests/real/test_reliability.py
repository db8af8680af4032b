"""Our processes through what a long-lived real cluster does to them: kube-apiserver restarting, etcd
compacting away the resourceVersions their watches resume from (410 Gone, a re-list), the leader of two
koord-manager and two koord-scheduler replicas going away (a handover on real Leases), a node deleted
while pods bind to it. After each: nothing bound twice (kube-apiserver's own audit log counts bindings),
nothing lost (every pod that can be placed is)."""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from tests.real.objects import IDLE, apply, be_pod, get, node_metric, pods
from tests.realcluster.cluster import Cluster
from tests.realcluster.control import audit_events
from tests.realcluster.hollow import TAINT, HollowNode
from tests.realcluster.procs import Started, wait_until

NS_SYSTEM = "koordinator-system"


def bindings(cluster: Cluster) -> Counter[str]:
    """Successful bindings per pod, as kube-apiserver logged them."""
    count: Counter[str] = Counter()
    for ev in audit_events(cluster.state):
        ref = ev.get("objectRef", {})
        if ref.get("subresource") == "binding" and ev.get("responseStatus", {}).get("code") in (200, 201):
            count[f"{ref.get('namespace')}/{ref.get('name')}"] += 1
    return count


def assert_none_bound_twice(cluster: Cluster) -> None:
    twice = {pod: n for pod, n in bindings(cluster).items() if n > 1}
    assert twice == {}, twice


def lease_holder(cluster: Cluster, name: str) -> str:
    spec = get(cluster, "lease", name, ns=NS_SYSTEM)["spec"]
    return str(spec.get("holderIdentity") or "")


def replicas(cluster: Cluster, prefix: str) -> dict[str, Started]:
    return {n: p for n, p in cluster.procs.items() if n.startswith(prefix + "-")}


def appear(cluster: Cluster, hollow: HollowNode) -> None:
    """The hollow node made, with koord-manager's NodeMetric for it reported fresh and idle."""
    hollow.create()
    wait_until(
        f"koord-manager's NodeMetric for {hollow.name}",
        lambda: get(cluster, "nodemetric", hollow.name, ns=None),
        60,
    )
    hollow.report()


def koord_scheduler_binds(cluster: Cluster, name: str) -> None:
    """koord-scheduler binds a new pod. To a hollow node reported idle: whether the real node has room
    depends on what else this machine runs, and that is not what these tests are about."""
    hollow = HollowNode(f"hollow-{name}", cluster.kubectl)
    appear(cluster, hollow)
    try:
        apply(cluster, _hollow_pod(name, hollow.name))
        wait_until(
            f"{name} bound", lambda: get(cluster, "pod", name)["spec"].get("nodeName") == hollow.name, 90
        )
    finally:
        cluster.kubectl("delete", "pod", name, "--grace-period=0", "--force", "--ignore-not-found")
        hollow.delete()


def metric_time(cluster: Cluster) -> str:
    return str(node_metric(cluster).get("status", {}).get("updateTime", ""))


def test_kube_apiserver_restart(cluster: Cluster) -> None:
    # Proves against: a real kube-apiserver going away and coming back (watches broken, a new process).
    before = metric_time(cluster)
    began = time.monotonic()
    cluster.restart("kube-apiserver")
    print(f"kube-apiserver down and up again in {time.monotonic() - began:.1f} s")
    wait_until("a NodeMetric report after the restart", lambda: metric_time(cluster) > before, 90)
    koord_scheduler_binds(cluster, "after-restart")
    for name, p in cluster.procs.items():
        assert p.running(), f"{name} exited:\n{p.tail()}"
        if name.startswith("koord"):
            wait_until(f"{name} ready", functools.partial(cluster.ready, p), 60)
    assert_none_bound_twice(cluster)


def _etcd(cluster: Cluster, path: str, body: dict[str, Any]) -> dict[str, Any]:
    assert cluster.ports is not None
    req = urllib.request.Request(
        f"http://127.0.0.1:{cluster.ports.etcd_client}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        doc: dict[str, Any] = json.loads(r.read())
    return doc


def test_etcd_compaction_makes_watches_relist(cluster: Cluster) -> None:
    # Proves against: etcd's compaction and kube-apiserver's 410 Gone for a watch resumed from a
    # compacted resourceVersion (its watch cache restarts empty with the process).
    ours = {n: p for n, p in cluster.procs.items() if n.startswith("koord")}
    sizes = {n: Path(p.log).stat().st_size for n, p in ours.items()}
    # Writes after the processes' last seen resourceVersions, then compact them all away.
    for i in range(5):
        cluster.kubectl(
            "annotate", "node", cluster.node_name, f"koordlet.test/compaction-{i}=x", "--overwrite"
        )
    rev = int(_etcd(cluster, "/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
    _etcd(cluster, "/v3/kv/compaction", {"revision": str(rev), "physical": True})
    cluster.restart("kube-apiserver")

    def since(name: str) -> str:
        return Path(ours[name].log).read_text(errors="replace")[sizes[name] :]

    # A leader whose renewals failed for its whole renew deadline exits and is restarted (a fresh list,
    # no 410); every other process must re-list from the 410.
    def waiting() -> list[str]:
        return [
            n for n in ours if "expired (410)" not in since(n) and "supervise: restarting" not in since(n)
        ]

    with contextlib.suppress(TimeoutError):
        wait_until("our processes re-listing after 410 Gone", lambda: not waiting(), 120)
    assert waiting() == [], {n: since(n)[-3000:] for n in waiting()}
    relisted = [n for n in ours if "expired (410)" in since(n)]
    print(f"re-listed after 410: {relisted}; restarted instead: {sorted(set(ours) - set(relisted))}")
    assert relisted
    koord_scheduler_binds(cluster, "after-compaction")
    before = metric_time(cluster)
    wait_until("a NodeMetric report after the re-list", lambda: metric_time(cluster) > before, 60)
    assert_none_bound_twice(cluster)


def _handover(cluster: Cluster, lease: str, prefix: str) -> tuple[str, str, float]:
    holder = lease_holder(cluster, lease)
    procs = replicas(cluster, prefix)
    assert holder in procs, (holder, list(procs))
    stopped = time.monotonic()
    procs[holder].stop()
    wait_until(f"a new holder of {lease}", lambda: lease_holder(cluster, lease) not in ("", holder), 60)
    took = time.monotonic() - stopped
    return holder, lease_holder(cluster, lease), took


def test_koord_scheduler_leader_handover(cluster: Cluster) -> None:
    # Proves against: real Leases (coordination.k8s.io/v1) and their optimistic concurrency.
    old, new, took = _handover(cluster, "koord-scheduler", "koord-scheduler")
    print(f"koord-scheduler: {old} -> {new} in {took:.1f} s")
    koord_scheduler_binds(cluster, "after-handover")
    cluster.restart(old)
    assert_none_bound_twice(cluster)


def test_koord_manager_leader_handover(cluster: Cluster) -> None:
    # Proves against: real Leases; the new leader's writes of NodeSLO on the real API server.
    old, new, took = _handover(cluster, "koordinator-manager", "koord-manager")
    print(f"koord-manager: {old} -> {new} in {took:.1f} s")
    cm = get(cluster, "configmap", "slo-controller-config", ns=NS_SYSTEM)
    thresholds = json.loads(cm["data"]["resource-threshold-config"])
    was = thresholds["clusterStrategy"].get("cpuSuppressThresholdPercent", 65)
    thresholds["clusterStrategy"]["cpuSuppressThresholdPercent"] = was + 1
    patch = {"data": {"resource-threshold-config": json.dumps(thresholds)}}
    cluster.kubectl(
        "patch",
        "configmap",
        "slo-controller-config",
        "-n",
        NS_SYSTEM,
        "--type=merge",
        "-p",
        json.dumps(patch),
    )

    def applied() -> bool:
        spec = get(cluster, "nodeslo", cluster.node_name, ns=None)["spec"]
        return bool(spec["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == was + 1)

    try:
        wait_until("the new leader's NodeSLO", applied, 60)
    finally:
        thresholds["clusterStrategy"]["cpuSuppressThresholdPercent"] = was
        patch = {"data": {"resource-threshold-config": json.dumps(thresholds)}}
        cluster.kubectl(
            "patch",
            "configmap",
            "slo-controller-config",
            "-n",
            NS_SYSTEM,
            "--type=merge",
            "-p",
            json.dumps(patch),
        )
        cluster.restart(old)


def _hollow_pod(name: str, node: str) -> dict[str, Any]:
    # A plain pod for koord-scheduler: a node without an agent has no batch resources, and LoadAware
    # estimates a batch pod without batch requests at its defaults (250m), as Koordinator's estimator does,
    # which a batch of them on one node takes over its threshold.
    pod = be_pod(name, IDLE)
    pod["metadata"]["labels"] = {"app": name, "koordlet.test/hollow-pod": "true"}
    del pod["spec"]["priorityClassName"]
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m", "memory": "16Mi"}}
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    pod["spec"]["tolerations"] = [{"key": TAINT, "operator": "Exists"}]
    return pod


def test_node_deleted_while_pods_bind(cluster: Cluster) -> None:
    # Proves against: kube-apiserver's Binding to a Node that no longer exists (and to its namesake
    # made again), and kube-controller-manager's garbage collection of pods bound to a gone node.
    hollow = HollowNode("hollow-0", cluster.kubectl)
    appear(cluster, hollow)
    names = [f"hollow-pod-{i}" for i in range(30)]
    try:
        apply(cluster, *(_hollow_pod(n, hollow.name) for n in names))
        hollow.delete()
        time.sleep(2)
        # The node comes back: every pod of the batch that still exists ends up bound, none twice.
        appear(cluster, hollow)

        def pending() -> list[str]:
            left = pods(cluster, "koordlet.test/hollow-pod=true")
            return [p["metadata"]["name"] for p in left if p["spec"].get("nodeName") != hollow.name]

        def settled() -> bool:
            # The hollow node's agent: its report kept fresh (koord-manager may have made its NodeMetric
            # anew for the returned node, with no status yet).
            hollow.heartbeat()
            hollow.report()
            return not pending()

        with contextlib.suppress(TimeoutError):
            wait_until("every remaining pod bound to the returned node", settled, 90, every=1)
        still = pending()
        assert not still, cluster.kubectl("describe", "pod", still[0])[-1500:]
        counts = bindings(cluster)
        bound = [n for n in names if counts[f"default/{n}"]]
        left = pods(cluster, "koordlet.test/hollow-pod=true")
        print(f"{len(bound)} of {len(names)} pods bound; {len(left)} left")
        assert bound
        assert_none_bound_twice(cluster)
    finally:
        cluster.kubectl(
            "delete",
            "pods",
            "-l",
            "koordlet.test/hollow-pod=true",
            "--grace-period=0",
            "--force",
            "--wait=false",
        )
        hollow.delete()
