"""koord-scheduler as a real child process (``python -m koord.scheduler``) against an API server, with its
configuration written to a directory of the test's; plus what its tests read back: the trace the
process-test plugins write (``tests/fixtures/scheduler_points_dist``), its metrics, and the API server's
record of bindings. Independent of pytest."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from koord.scheduler.framework.types import PODS, PodInfo, resources_of
from koordlet.testing.wait import wait_until
from koordshared.kube.client import make_api_client, request
from koordshared.testing import objects
from koordshared.testing.ports import EPHEMERAL
from tests.apiserver import APIServer
from tests.apiserver.watch import WatchEvent
from tests.cluster.child import ChildProcess
from tests.managerharness import write_kubeconfig
from tests.support.paths import ROOT

POINTS_DIST = ROOT / "tests" / "fixtures" / "scheduler_points_dist"
"""The process-test plugins' distribution (installed as a wheel by the tests)."""
SCHEDULER = "koord-scheduler"
CONFIG_API = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def configuration(*profiles: Mapping[str, Any], **top: Any) -> dict[str, Any]:
    """A KubeSchedulerConfiguration with these profiles (``{}``: koord-scheduler's defaults)."""
    return {**CONFIG_API, **top, "profiles": [dict(p) for p in profiles] or [{}]}


class KoordSchedulerProcess(ChildProcess):
    """One ``koord-scheduler`` child; without ``elect`` it runs with ``--no-leader-elect``; with ``token``
    it authenticates with that bearer token."""

    def __init__(
        self,
        tmp: Path,
        server: APIServer,
        config: Mapping[str, Any] | None = None,
        *args: str,
        name: str = "koord-scheduler",
        site: Path | None = None,
        elect: bool = False,
        token: str = "",
    ) -> None:
        kubeconfig = write_kubeconfig(tmp / f"{name}-kubeconfig.json", server)
        if token:  # authenticate as the owner of the token (a ServiceAccount), as in a cluster
            doc = json.loads(kubeconfig.read_text())
            doc["users"][0]["user"] = {"token": token}
            kubeconfig.write_text(json.dumps(doc))
        argv = [f"--kubeconfig={kubeconfig}", f"--addr={EPHEMERAL}", *args]
        if config is not None:
            path = tmp / f"{name}-config.json"
            path.write_text(json.dumps(config))
            argv.append(f"--config={path}")
        if not elect:
            argv.append("--no-leader-elect")
        env = {"PYTHONPATH": str(site)} if site is not None else None
        super().__init__(name, "koord.scheduler", argv, tmp / f"{name}.log", env)

    def ready(self, timeout: float = 60.0) -> bool:
        return bool(wait_until(lambda: self.alive() and self._ready(), timeout, step=0.05))

    def _ready(self) -> bool:
        try:
            return self.get("/readyz")[0] == 200
        except OSError:
            return False

    def metric(self, name: str, **labels: str) -> float:
        """A sample of /metrics (0 when absent)."""
        text = self.get("/metrics")[1]
        for line in text.splitlines():
            m = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
            if not m or m.group(1) != name:
                continue
            have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                return float(m.group(3))
        return 0.0

    def wait_metric(self, name: str, value: float, timeout: float = 10.0, **labels: str) -> bool:
        """Whether the sample reaches ``value`` in ``timeout`` (metrics lag the API writes they follow)."""
        return bool(wait_until(lambda: self.metric(name, **labels) == value, timeout, step=0.05))


@contextmanager
def running(
    tmp: Path, server: APIServer, config: Mapping[str, Any] | None = None, *args: str, name: str = SCHEDULER
) -> Iterator[KoordSchedulerProcess]:
    """The process, ready; stopped with SIGTERM when the block ends and checked to exit 0 (a crash or a
    hang on the way out fails the test that caused it)."""
    proc = KoordSchedulerProcess(tmp, server, config, *args, name=name)
    try:
        assert proc.ready(60), proc.log()[-3000:]
        yield proc
    finally:
        code = proc.stop(30)
    assert code == 0, proc.log()[-3000:]


# ---- what the tests read back ---------------------------------------------------------------------------


def trace(path: Path) -> list[dict[str, Any]]:
    """The process-test plugins' records, oldest first."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def calls(path: Path, point: str, pod: str = "", result: str | None = None) -> list[dict[str, Any]]:
    return [
        r
        for r in trace(path)
        if r["point"] == point and (not pod or r["pod"] == pod) and (result is None or r["result"] == result)
    ]


def node_of(server: APIServer, name: str, namespace: str = "default") -> str:
    """The node a pod is bound to ("" unbound or gone)."""
    try:
        pod = server.store.get("pods", name, namespace)
    except Exception:
        return ""
    return str(pod["spec"].get("nodeName") or "")


def bindings(server: APIServer, status: int | None = 201) -> list[tuple[str, str]]:
    """(pod key, node) of every binding request the server answered (with ``status``; None: any)."""
    out = []
    for r in server.requests:
        if r.method == "POST" and r.path.endswith("/binding") and (status is None or r.status == status):
            meta = r.body.get("metadata") or {}
            out.append((f"{meta.get('namespace')}/{meta.get('name')}", r.body["target"]["name"]))
    return out


def events_for(server: APIServer, name: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in server.store.list("events")[0]
        if e.get("reason") == reason and (e.get("involvedObject") or {}).get("name") == name
    ]


def condition(server: APIServer, name: str, typ: str = "PodScheduled") -> dict[str, Any]:
    pod = server.store.get("pods", name, "default")
    return next((c for c in pod.get("status", {}).get("conditions") or [] if c["type"] == typ), {})


class BindingAudit:
    """Checks every binding the moment the API server commits it (a store listener, under the store's
    lock, in commit order): the requests of the pods bound to the node, this one included, fit its
    allocatable. ``violations`` lists the bindings that did not; ``bound`` counts bindings per pod UID;
    ``to_missing`` lists bindings to a node that did not exist at that moment."""

    def __init__(self, server: APIServer) -> None:
        self.server = server
        self.violations: list[str] = []
        self.bound: dict[str, int] = {}
        self.to_missing: list[str] = []
        server.store.add_listener(self._on_write)

    def _on_write(self, event: WatchEvent) -> None:
        if event.key != ("", "pods") or event.type != "MODIFIED" or event.old is None:
            return
        node = event.obj["spec"].get("nodeName")
        if not node or event.old["spec"].get("nodeName"):
            return
        meta = event.obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        self.bound[meta["uid"]] = self.bound.get(meta["uid"], 0) + 1
        store = self.server.store
        if not store.exists("nodes", node):
            self.to_missing.append(f"{key} -> {node}")
            return
        allocatable = resources_of(store.get("nodes", node)["status"].get("allocatable"))
        pods = [p for p in store.list("pods")[0] if p["spec"].get("nodeName") == node]
        used: dict[str, int] = {PODS: len(pods)}
        for p in pods:
            for res, v in PodInfo(p).requests.items():
                used[res] = used.get(res, 0) + v
        over = {r: (v, allocatable.get(r, 0)) for r, v in used.items() if v > allocatable.get(r, 0)}
        if over:
            self.violations.append(f"{key} -> {node}: (requested, allocatable) {over}")


class Cluster:
    """The writes a test makes, through the API server's HTTP API (validated, admitted and watched as
    kubectl's are)."""

    def __init__(self, server: APIServer) -> None:
        self.server = server
        self.client = make_api_client(client_configuration=server.client_config())

    def pod(
        self,
        name: str,
        *,
        cpu: str = "100m",
        labels: Mapping[str, str] | None = None,
        scheduler: str = SCHEDULER,
        **spec: Any,
    ) -> dict[str, Any]:
        pod = objects.pod(name, requests={"cpu": cpu}, labels=labels, scheduler_name=scheduler)
        del pod["metadata"]["uid"], pod["status"]
        pod["spec"].update(spec)
        out: dict[str, Any] = request(
            self.client, "create pod", "POST", "/api/v1/namespaces/default/pods", body=pod
        )
        return out

    def label(self, name: str, labels: Mapping[str, str]) -> None:
        request(
            self.client,
            "label pod",
            "PATCH",
            f"/api/v1/namespaces/default/pods/{name}",
            body={"metadata": {"labels": dict(labels)}},
            content_type="application/merge-patch+json",
        )

    def delete_pod(self, name: str) -> None:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
        request(self.client, "delete pod", "DELETE", f"/api/v1/namespaces/default/pods/{name}", body=body)

    def node(self, name: str, cpu: str = "2", *, taints: Sequence[Mapping[str, str]] = (), **kw: Any) -> None:
        node = objects.node(name, cpu, **kw)
        if taints:
            node["spec"]["taints"] = [dict(t) for t in taints]
        request(self.client, "create node", "POST", "/api/v1/nodes", body=node)

    def delete_node(self, name: str) -> None:
        request(self.client, "delete node", "DELETE", f"/api/v1/nodes/{name}")

    def close(self) -> None:
        self.client.close()
