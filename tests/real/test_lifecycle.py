"""``make cluster`` and its stop on the real thing: a Ready node and our four processes within three
minutes of the start (binaries cached), visible to kubectl; the stop ends every process it started and
leaves no mount, cgroup or network device behind."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

from tests.real.conftest import BEFORE, UP_OUTPUT
from tests.realcluster.cluster import Cluster
from tests.realcluster.footprint import Footprint
from tests.realcluster.procs import wait_until

OURS = ("koordlet", "koord-manager", "koord-scheduler", "koord-descheduler")


def _seconds_to_ready(output: str) -> float:
    line = next(ln for ln in output.splitlines() if "ready: node" in ln)
    return float(line.split("]")[0].strip("[ s"))


def test_make_cluster_gives_a_ready_node_and_our_processes(cluster: Cluster) -> None:
    # Proves against: kube-apiserver, kube-controller-manager, kubelet and containerd (a Ready Node).
    took = _seconds_to_ready(UP_OUTPUT[0])
    print(f"cluster up in {took:.1f} s")
    assert took < 180, UP_OUTPUT[0]
    nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json"))["items"]
    assert [n["metadata"]["name"] for n in nodes] == [cluster.node_name]
    ready = {c["type"]: c["status"] for c in nodes[0]["status"]["conditions"]}
    assert ready["Ready"] == "True", ready
    assert nodes[0]["status"]["nodeInfo"]["kubeletVersion"] == cluster.version
    table = cluster.kubectl("get", "nodes,pods", "-A")
    assert cluster.node_name in table and "Ready" in table
    for name in OURS:
        procs = [p for n, p in cluster.procs.items() if n == name or n.startswith(name + "-")]
        assert procs and all(p.running() for p in procs), (name, list(cluster.procs))
        for p in procs:
            assert cluster.ready(p), p.tail()


def test_stop_leaves_nothing_behind(cluster: Cluster) -> None:
    # Proves against: the kubelet's and containerd's own clean-up of pods, sandboxes and their mounts.
    recorded = list(cluster.procs.values())
    done = subprocess.run(
        [sys.executable, "-m", "tests.realcluster", "down", "--state", str(cluster.state)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert [p.name for p in recorded if p.running()] == []

    # Shims and container processes leave after their tasks: give the last of them a moment.
    def left() -> dict[str, list[str]]:
        return Footprint.now().added_since(BEFORE[0], state=cluster.state)

    with contextlib.suppress(TimeoutError):
        wait_until("nothing left behind", lambda: not left(), 15)
    assert left() == {}
    assert not (cluster.state / "cluster.json").exists()
