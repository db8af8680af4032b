"""``deploy/daemonset/koordlet.yaml`` as it is, run by the real kubelet: the project's image (made from
this machine's Python, :mod:`tests.realcluster.projectimage`), hostPID, the host's cgroups, sysfs and
kubelet directory mounted where the DaemonSet says, every capability dropped but KILL, a read-only root
filesystem, the in-cluster service account, and the kubelet's probes on the pod's own address.

The tier's agent otherwise runs as a host process; it is stopped while the DaemonSet's pod has the node,
and started again after."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.real.objects import (
    apply,
    be_pod,
    container_cgroup,
    get,
    node_metric,
    pods,
    wait_for_room,
    wait_running,
)
from tests.realcluster import binaries, node, projectimage
from tests.realcluster.cluster import Cluster
from tests.realcluster.procs import wait_until
from tests.realcluster.stack import DEPLOY, REPO

NS = "koordinator-system"
CAP_KILL = 1 << 5


def _agent_pod(cluster: Cluster) -> dict[str, object] | None:
    found = json.loads(cluster.kubectl("get", "pods", "-n", NS, "-l", "koord-app=koordlet", "-o", "json"))[
        "items"
    ]
    return found[0] if found else None


def _ready(pod: dict[str, Any] | None) -> bool:
    conditions = (pod or {}).get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _agent_pid(pod_uid: str) -> int:
    """The agent's PID, found in its container's cgroup (the pod shares the host's PID namespace)."""
    for procs in Path("/sys/fs/cgroup/cpu/kubepods/burstable").glob(f"pod{pod_uid}/*/cgroup.procs"):
        for line in procs.read_text().split():
            if b"koordlet" in Path(f"/proc/{line}/cmdline").read_bytes():
                return int(line)
    raise LookupError(f"no koordlet process in pod {pod_uid}")


def test_the_daemonset_runs_unchanged_on_the_real_kubelet(cluster: Cluster) -> None:
    # Proves against: the kubelet and containerd running the manifest (mounts, capabilities, probes),
    # kube-apiserver serving the pod's in-cluster configuration.
    archive = projectimage.write_archive(
        cluster.state / "koordlet-py.tar", REPO, binaries.cache_root() / "images"
    )
    node.import_images(cluster.state, archive)
    cluster.procs["koordlet"].stop()
    manifest = DEPLOY / "daemonset" / "koordlet.yaml"
    try:
        cluster.kubectl("apply", "-f", str(manifest))
        wait_until(
            "the DaemonSet's pod Ready (its readiness probe)", lambda: _ready(_agent_pod(cluster)), 180
        )
        pod = _agent_pod(cluster)
        assert pod is not None
        uid = str(pod["metadata"]["uid"])  # type: ignore[index]
        # What the kubelet gave it: every capability dropped but KILL, the host's PID namespace.
        status = Path(f"/proc/{_agent_pid(uid)}/status").read_text()
        caps = {
            k: int(v, 16) for k, v in (ln.split(":") for ln in status.splitlines() if ln.startswith("Cap"))
        }
        assert caps["CapEff"] == CAP_KILL, status
        # It reports the node with the service account the kubelet mounted...
        before = str(node_metric(cluster).get("status", {}).get("updateTime", ""))
        wait_until(
            "a NodeMetric report from the pod",
            lambda: str(node_metric(cluster)["status"].get("updateTime", "")) > before,
            90,
        )
        # ...and writes the host's cgroups through its mount: a BE pod's batch limit as its CFS quota.
        wait_for_room(cluster, batch_cpu=200)  # the kubelet admits a BE pod only within batch-cpu
        be = be_pod("ds-be", "sleep 100000", batch_cpu=150, batch_memory="32Mi")
        be["spec"]["nodeName"] = cluster.node_name
        apply(cluster, be)
        (started,) = wait_running(cluster, "app=ds-be")
        quota = container_cgroup(started) / "cpu.cfs_quota_us"
        wait_until(
            "the BE container's quota from the pod's agent", lambda: quota.read_text().strip() == "15000", 60
        )
        restarts = get(cluster, "pod", pod["metadata"]["name"], ns=NS)["status"]["containerStatuses"][0]  # type: ignore[index]
        assert restarts["restartCount"] == 0, restarts
    finally:
        cluster.kubectl("delete", "pod", "ds-be", "--ignore-not-found", "--grace-period=0", "--force")
        cluster.kubectl(
            "delete", "daemonset", "koordlet", "-n", NS, "--ignore-not-found", "--wait=true", "--timeout=60s"
        )
        wait_until("the DaemonSet's pod gone", lambda: not pods(cluster, "koord-app=koordlet", ns=NS), 60)
        cluster.restart("koordlet")
