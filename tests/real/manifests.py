"""``deploy/``'s manifests as kubectl sees them, for ``test_deploy``: every API object under ``deploy/`` as
written (raw YAML, so a duplicate key still reaches the server), and ``applied`` that applies them all and
afterwards deletes what the apply created (the workloads and their pods among it), leaving what the
cluster's bring-up applied."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.real.objects import get
from tests.realcluster import node
from tests.realcluster.cluster import Cluster
from tests.realcluster.procs import wait_until
from tests.realcluster.stack import DEPLOY, NAMESPACE

WORKLOADS = ("Deployment", "DaemonSet")
NOT_OBJECTS = {"scheduler/koordinator-profile.yaml", "scheduler/kube-scheduler-config.yaml"}
"""KubeSchedulerConfiguration files: read by kube-scheduler from disk, not objects of the API."""
EXAMPLE_NODESLO = DEPLOY / "daemonset" / "nodeslo-example.yaml"
HOST_DIR = Path("/var/run/koordlet")
"""Where the DaemonSet's DirectoryOrCreate hostPath (prediction checkpoints) is made by the kubelet."""
Doc = tuple[str, dict[str, Any]]


def _documents(path: Path) -> list[Doc]:
    chunks = re.split(r"(?m)^---[ \t]*$", path.read_text())
    return [(c, d) for c in chunks if isinstance(d := yaml.safe_load(c), dict)]


def deploy_objects() -> list[Doc]:
    """Every API object under ``deploy/`` (raw text, parsed), workloads last so that the ServiceAccounts
    their pods name exist when the controllers create the pods. Left out: the Prometheus Operator's
    PodMonitor in prometheus-scrape.yaml (its CRD comes with the operator, which this cluster does not run;
    the file's other objects are applied) and the example NodeSLO (koord-manager owns every NodeSLO)."""
    out = []
    for path in sorted(DEPLOY.rglob("*.yaml")):
        if str(path.relative_to(DEPLOY)) in NOT_OBJECTS or path == EXAMPLE_NODESLO:
            continue
        docs = _documents(path)
        assert docs and all(d.get("kind") and (d.get("metadata") or {}).get("name") for _, d in docs), path
        out += [(raw, d) for raw, d in docs if d["kind"] != "PodMonitor"]
    return sorted(out, key=lambda item: item[1]["kind"] in WORKLOADS)


def key(doc: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = doc["metadata"]
    return doc["kind"], meta.get("namespace") or "", meta["name"]


def stream(docs: list[Doc]) -> str:
    return "\n---\n".join(raw.strip("\n") for raw, _ in docs) + "\n"


def kubectl(
    cluster: Cluster, *args: str, stdin: str = "", timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """kubectl on the cluster, its exit status kept (``diff`` says 1 for a difference)."""
    return subprocess.run(
        ["kubectl", f"--kubeconfig={cluster.admin_kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def existing(cluster: Cluster, docs: list[Doc]) -> set[tuple[str, str, str]]:
    doc = json.loads(
        cluster.kubectl("get", "-f", "-", "--ignore-not-found", "-o", "json", stdin=stream(docs))
    )
    items = doc.get("items", [doc]) if doc else []
    return {key(i) for i in items}


def system_pods(cluster: Cluster) -> dict[str, str]:
    """The pods of koordinator-system, name to UID."""
    items = json.loads(cluster.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json"))["items"]
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in items}


def without_all_pods(cluster: Cluster, workloads: list[dict[str, Any]]) -> list[str]:
    """The workloads whose controller has not created every pod yet (empty: each has)."""
    short = []
    for w in workloads:
        live = get(cluster, w["kind"].lower(), w["metadata"]["name"], ns=NAMESPACE)
        st = live.get("status", {})
        if w["kind"] == "DaemonSet":
            want = st.get("desiredNumberScheduled", 0)
            ok = want >= 1 and st.get("currentNumberScheduled") == want
        else:
            ok = st.get("replicas", 0) == live["spec"]["replicas"]
        if not ok:
            short.append(f"{w['kind']} {w['metadata']['name']}: {st}")
    return short


@dataclass
class Applied:
    docs: list[Doc]
    result: subprocess.CompletedProcess[str]
    seconds: float


@contextlib.contextmanager
def applied(cluster: Cluster) -> Iterator[Applied]:
    """deploy/ applied with strict field validation; on leaving, every object the apply created is deleted,
    its pods waited for (forced after a minute) until the kubelet is done with them, and the hostPath
    directory the kubelet made for the DaemonSet's pod removed if it was not there before."""
    docs = deploy_objects()
    before = existing(cluster, docs)
    pods_before = set(system_pods(cluster))
    host_dir_before = HOST_DIR.exists()
    try:
        began = time.monotonic()
        result = kubectl(cluster, "apply", "--validate=strict", "-f", "-", stdin=stream(docs))
        yield Applied(docs, result, time.monotonic() - began)
    finally:
        uids = {u for n, u in system_pods(cluster).items() if n not in pods_before}
        created = [(raw, d) for raw, d in docs if key(d) not in before]
        if created:
            kubectl(
                cluster, "delete", "-f", "-", "--ignore-not-found", "--timeout=120s", stdin=stream(created)
            )

        def left() -> list[str]:
            now = {n: u for n, u in system_pods(cluster).items() if n not in pods_before}
            uids.update(now.values())
            return sorted(now)

        with contextlib.suppress(TimeoutError):
            wait_until("the workloads' pods gone", lambda: not left(), 60, every=1)
        if left():
            kubectl(cluster, "delete", "pod", "-n", NAMESPACE, "--force", "--grace-period=0", *left())
            wait_until("the workloads' pods gone (forced)", lambda: not left(), 60, every=1)
        # The kubelet has unmounted a pod's volumes once its directory is gone: no hostPath is made after.
        pod_dirs = [node.KUBELET_ROOT / "pods" / uid for uid in uids]
        wait_until(
            "the kubelet done with the pods", lambda: not any(d.exists() for d in pod_dirs), 60, every=1
        )
        if not host_dir_before and HOST_DIR.exists():
            for sub in sorted(HOST_DIR.rglob("*"), reverse=True):
                sub.rmdir()  # empty directories only: the agent's container never started
            HOST_DIR.rmdir()
