"""A LowNodeLoad move through a PodMigrationJob on the real cluster, with the stack as deploy/ runs it:
koord-descheduler (LowNodeLoad at 45/75 %, ReservationFirst) finds a hot node, its job's Reservation is
placed by koord-scheduler on another node before the pod is evicted, kube-controller-manager's ReplicaSet
makes the replacement, koord-scheduler puts it in the Reservation, the job succeeds; its Events are listed
by ``kubectl get events --field-selector``; deleting the job lets the garbage collector delete its
Reservation. The nodes are hollow (no kubelet): the test stands in for their kubelet (the pods' Ready
status, confirming a deletion) and their agent (the NodeMetric reports)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from tests.real.objects import IDLE, NS, apply, get
from tests.realcluster.cluster import Cluster
from tests.realcluster.hollow import TAINT, HollowNode
from tests.realcluster.images import BUSYBOX
from tests.realcluster.procs import wait_until

APP = "pmj-web"
HOT, COLD = "pmj-hot", "pmj-cold"


def deployment() -> dict[str, Any]:
    """Two replicas for koord-scheduler, on the hollow nodes only (either of them)."""
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [HOT, COLD]}
                        ]
                    }
                ]
            }
        }
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": APP, "namespace": NS},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": APP}},
            "template": {
                "metadata": {"labels": {"app": APP}},
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "terminationGracePeriodSeconds": 1,
                    "tolerations": [{"key": TAINT, "operator": "Exists"}],
                    "affinity": affinity,
                    "containers": [
                        {
                            "name": "main",
                            "image": BUSYBOX,
                            "imagePullPolicy": "Never",
                            "command": ["sh", "-c", IDLE],
                            "resources": {"requests": {"cpu": "100m", "memory": "16Mi"}},
                        }
                    ],
                },
            },
        },
    }


def ours(cluster: Cluster) -> list[dict[str, Any]]:
    doc = json.loads(cluster.kubectl("get", "pods", "-n", NS, "-l", f"app={APP}", "-o", "json"))
    return list(doc["items"])


def jobs(cluster: Cluster) -> list[dict[str, Any]]:
    doc = json.loads(cluster.kubectl("get", "podmigrationjobs", "-o", "json"))
    return [j for j in doc["items"] if j["spec"]["podRef"].get("name", "").startswith(APP)]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Kubelets:
    """What the hollow nodes' kubelets and agents would do: heartbeats, NodeMetric reports (``hot_milli`` on
    the hot node), bound pods reported Running and Ready, deletions confirmed."""

    def __init__(self, cluster: Cluster, hot: HollowNode, cold: HollowNode | None) -> None:
        self.cluster, self.hot, self.cold = cluster, hot, cold
        self.hot_milli = 500

    def report(self, node: str, milli: int) -> None:
        """The agent's report: ``milli`` cores used on ``node``, 100m of them by each of our pods there
        (LowNodeLoad counts the system's usage plus the pods', and moves only pods with a usage)."""
        on_node = [p["metadata"]["name"] for p in ours(self.cluster) if p["spec"].get("nodeName") == node]
        pods = [
            {"namespace": NS, "name": n, "podUsage": {"resources": {"cpu": "100m", "memory": "16Mi"}}}
            for n in on_node
        ]
        system = {"resources": {"cpu": f"{milli - 100 * len(pods)}m", "memory": "1Gi"}}
        status = {
            "updateTime": _now(),
            "nodeMetric": {
                "nodeUsage": {"resources": {"cpu": f"{milli}m", "memory": "1Gi"}},
                "systemUsage": system,
            },
            "podsMetric": pods,
        }
        self.cluster.kubectl(
            "patch",
            "nodemetric",
            node,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": status}),
        )

    def beat(self) -> None:
        for node, milli in ((self.hot, self.hot_milli), (self.cold, 500)):
            if node is not None:
                node.heartbeat()
                self.report(node.name, milli)
        for pod in ours(self.cluster):
            name = pod["metadata"]["name"]
            if pod["metadata"].get("deletionTimestamp"):
                self.cluster.kubectl(
                    "delete", "pod", name, "-n", NS, "--grace-period=0", "--force", "--wait=false"
                )
            elif pod["spec"].get("nodeName") and pod["status"].get("phase") != "Running":
                status = {
                    "status": {
                        "phase": "Running",
                        "conditions": [
                            {"type": "PodScheduled", "status": "True"},
                            {"type": "Ready", "status": "True"},
                            {"type": "ContainersReady", "status": "True"},
                        ],
                    }
                }
                self.cluster.kubectl(
                    "patch",
                    "pod",
                    name,
                    "-n",
                    NS,
                    "--subresource=status",
                    "--type=merge",
                    "-p",
                    json.dumps(status),
                )


def test_lownodeload_moves_a_pod_through_a_job_and_a_reservation(cluster: Cluster) -> None:
    # Proves against: kube-apiserver serving the PodMigrationJob CRD (structural, status subresource) and
    # our writes to it, the Reservation's owner reference to its job (kube-controller-manager's garbage
    # collector), the ReplicaSet controller replacing the evicted pod, koord-scheduler placing the
    # Reservation and then the replacement in it, and the Events' field selectors.
    hot = HollowNode(HOT, cluster.kubectl)
    cold = HollowNode(COLD, cluster.kubectl)
    kubelets = Kubelets(cluster, hot, None)
    try:
        hot.create()
        wait_until(
            "koord-manager's NodeMetric for the hot node",
            lambda: get(cluster, "nodemetric", HOT, ns=None),
            60,
        )
        kubelets.beat()
        apply(cluster, deployment())

        def both_on_hot() -> bool:
            kubelets.beat()
            placed = [p for p in ours(cluster) if p["spec"].get("nodeName") == HOT]
            return len(placed) == 2 and all(p["status"].get("phase") == "Running" for p in placed)

        wait_until("both replicas on the hot node", both_on_hot, 90, every=1)
        before = {p["metadata"]["name"] for p in ours(cluster)}
        cold.create()
        wait_until(
            "koord-manager's NodeMetric for the cold node",
            lambda: get(cluster, "nodemetric", COLD, ns=None),
            60,
        )
        kubelets.cold = cold
        kubelets.hot_milli = 7000  # 7 of 8 cores: over LowNodeLoad's 75 %

        found: list[dict[str, Any]] = []

        def job_made() -> bool:
            kubelets.beat()
            found[:] = jobs(cluster)
            return bool(found)

        # LowNodeLoad acts after more than 5 abnormal rounds of 10 s
        wait_until("a PodMigrationJob for one replica", job_made, 180, every=2)
        (job,) = found
        moved = job["spec"]["podRef"]["name"]
        assert moved in before and job["spec"]["mode"] == "ReservationFirst"

        def succeeded() -> bool:
            kubelets.beat()
            found[:] = jobs(cluster)
            return found[0].get("status", {}).get("phase") in ("Succeeded", "Failed")

        wait_until("the job done", succeeded, 180, every=1)
        (job,) = found
        assert job["status"]["phase"] == "Succeeded", json.dumps(job["status"], indent=1)
        rname = job["spec"]["reservationOptions"]["reservationRef"]["name"]
        reservation = get(cluster, "reservation", rname, ns=None)
        new = job["status"]["podRef"]["name"]
        assert reservation["status"]["nodeName"] == COLD == job["status"]["nodeName"]
        assert [o["name"] for o in reservation["status"]["currentOwners"]] == [new]
        assert new not in before and get(cluster, "pod", new)["spec"]["nodeName"] == COLD
        assert reservation["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]

        listed = json.loads(
            cluster.kubectl(
                "get",
                "events",
                "-n",
                "default",
                "--field-selector",
                f"involvedObject.kind=PodMigrationJob,involvedObject.name={job['metadata']['name']}",
                "-o",
                "json",
            )
        )["items"]
        reasons = [
            e["reason"]
            for e in sorted(listed, key=lambda e: e.get("eventTime") or e["metadata"]["creationTimestamp"])
        ]
        steps = ["ReservationCreated", "ReservationScheduled", "Evicting", "EvictComplete", "Complete"]
        assert [r for r in reasons if r in steps] == steps, reasons
        descheduled = json.loads(
            cluster.kubectl(
                "get",
                "events",
                "-n",
                NS,
                "--field-selector",
                f"reason=Descheduled,involvedObject.name={moved}",
                "-o",
                "json",
            )
        )["items"]
        assert len(descheduled) == 1 and descheduled[0]["involvedObject"]["kind"] == "Pod"

        # the job deleted: its Reservation goes with it (owner reference, garbage collector)
        cluster.kubectl("delete", "podmigrationjob", job["metadata"]["name"])
        wait_until(
            "the Reservation garbage-collected",
            lambda: (
                not cluster.kubectl("get", "reservations", "--ignore-not-found", "-o", "name").count(rname)
            ),
            60,
        )
    finally:
        cluster.kubectl("delete", "deployment", APP, "-n", NS, "--ignore-not-found", "--wait=false")
        cluster.kubectl(
            "delete",
            "pods",
            "-n",
            NS,
            "-l",
            f"app={APP}",
            "--grace-period=0",
            "--force",
            "--ignore-not-found",
        )
        for j in jobs(cluster):
            cluster.kubectl("delete", "podmigrationjob", j["metadata"]["name"], "--ignore-not-found")
        hot.delete()
        cold.delete()
