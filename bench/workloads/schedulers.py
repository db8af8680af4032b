"""The schedulers under test, started against a :class:`~tests.realcluster.cluster.Cluster` as host
processes the cluster stops: kube-scheduler (the built binary, optionally calling the extender),
koord-scheduler with the default profile or Koordinator's shipped one (optionally under the profiler), and
koord-scheduler-extender; every pod names ``default-scheduler``, each koord profile renamed so. Also
Koordinator's CRDs, applied and served before a scheduler lists them.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from bench.workloads.realsched import DEPLOY, NS, SCHEDULER
from tests.realcluster import stack
from tests.realcluster.cluster import Cluster, free_port
from tests.realcluster.procs import Started, spawn, wait_until
from tests.realcluster.rest import Rest

ROOT = Path(__file__).resolve().parents[2]


def venv_bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def write(path: Path, doc: Any) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def client_connection(c: Cluster, qps: float, burst: int, kubeconfig: Path | None = None) -> dict[str, Any]:
    return {"kubeconfig": str(kubeconfig or c.admin_kubeconfig), "qps": qps, "burst": burst}


def start_kube_scheduler(
    c: Cluster,
    work: Path,
    qps: float,
    burst: int,
    *,
    extender_port: int = 0,
    kubeconfig: Path | None = None,
    json: bool = False,
    http1: bool = False,
) -> Started:
    """kube-scheduler (the built binary, no leader election) with ``clientConnection`` qps/burst, as the
    admin (or ``kubeconfig``'s user); ``extender_port``: calling the extender there as
    ``deploy/scheduler/kube-scheduler-config.yaml`` does. ``json``: its requests and answers in JSON
    (``clientConnection.contentType``), not protobuf; ``http1``: HTTP/1.1 to the API server, not HTTP/2
    (client-go's ``DISABLE_HTTP2``): each as koord-scheduler's client talks."""
    doc: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": client_connection(c, qps, burst, kubeconfig),
        "leaderElection": {"leaderElect": False},
    }
    if json:
        doc["clientConnection"]["contentType"] = "application/json"
    if extender_port:
        shipped = stack.documents(DEPLOY / "kube-scheduler-config.yaml")[0]
        extenders = [dict(e, urlPrefix=f"http://127.0.0.1:{extender_port}") for e in shipped["extenders"]]
        doc["extenders"] = extenders
        doc["profiles"] = shipped["profiles"]
    config = write(work / "kube-scheduler.yaml", doc)
    assert c.ports is not None
    kc = kubeconfig or c.admin_kubeconfig
    return c.adopt(
        spawn(
            "kube-scheduler",
            [
                str(binaries_dir(c) / "kube-scheduler"),
                f"--config={config}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--bind-address=127.0.0.1",
                f"--secure-port={c.ports.scheduler}",
                "--profiling=false",
            ],
            c.logs,
            env={"DISABLE_HTTP2": "1"} if http1 else None,
        )
    )


def binaries_dir(c: Cluster) -> Path:
    return Path(c.procs["kube-apiserver"].argv[0]).parent


def koord_config(c: Cluster, work: Path, profile: str, qps: float, burst: int) -> Path:
    if profile == "koordinator":
        doc = stack.documents(DEPLOY / "koordinator-profile.yaml")[0]
        doc.pop("leaderElection", None)
        for p in doc["profiles"]:
            p["schedulerName"] = SCHEDULER
    else:
        doc = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": SCHEDULER}],
        }
    doc["clientConnection"] = client_connection(c, qps, burst)
    return write(work / f"koord-scheduler-{profile}.yaml", doc)


def start_koord_scheduler(
    c: Cluster,
    work: Path,
    profile: str,
    qps: float,
    burst: int,
    prof: Path | None = None,
    trace: Path | None = None,
) -> Started:
    """koord-scheduler with ``profile``; ``prof``: under cProfile (:mod:`.profiled`), ``trace``: with its
    stage marks (:mod:`.traced`), each written to its path when the process stops."""
    config = koord_config(c, work, profile, qps, burst)
    kc = c.admin_kubeconfig
    args = [f"--kubeconfig={kc}", "--addr=127.0.0.1:0", "--no-leader-elect", f"--config={config}"]
    argv = [venv_bin("koord-scheduler"), *args]
    for wrapper, out in (("profiled", prof), ("traced", trace)):
        if out is not None:
            entry = "koord.scheduler.cli:entry"
            argv = [sys.executable, "-m", f"bench.workloads.{wrapper}", str(out), entry, "--", *args]
    return c.adopt(spawn("koord-scheduler", argv, c.logs, env={"PYTHONUNBUFFERED": "1"}, cwd=ROOT))


def start_extender(c: Cluster, work: Path) -> tuple[Started, int]:
    """koord-scheduler-extender with the shipped configuration, waited ready."""
    maps = [d for d in stack.documents(DEPLOY / "extender.yaml") if d.get("kind") == "ConfigMap"]
    config = work / "extender.yaml"
    config.write_text(maps[0]["data"]["config.yaml"])
    port = free_port()
    argv = [
        venv_bin("koord-scheduler-extender"),
        f"--kubeconfig={c.admin_kubeconfig}",
        f"--addr=127.0.0.1:{port}",
        f"--config={config}",
        "--bind-timeout=4s",
    ]
    p = c.adopt(spawn("koord-scheduler-extender", argv, c.logs, env={"PYTHONUNBUFFERED": "1"}, cwd=ROOT))
    from koordlet.testing.agent import http_get

    wait_until(
        "koord-scheduler-extender ready",
        lambda: http_get(f"http://127.0.0.1:{port}/readyz", timeout=1.0)[0] == 200,
        120,
        watch=[p],
    )
    return p, port


# -- one run


def apply_crds(c: Cluster, rest: Rest) -> None:
    """Koordinator's CRDs (established) and the namespaces: the bench's and ``koordinator-system``."""
    kc = c.admin_kubeconfig
    for d in stack.CRD_DIRS:
        stack.kubectl(kc, "apply", "-f", str(d))
    stack.kubectl(kc, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    # Established is not yet served: a list right after it may answer 404 (and a scheduler's informer then
    # backs off for seconds).
    for crd in rest.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")["items"]:
        spec = crd["spec"]
        version = next(v["name"] for v in spec["versions"] if v.get("served"))
        path = f"/apis/{spec['group']}/{version}/{spec['names']['plural']}?limit=1"
        wait_until(f"{path} served", functools.partial(rest.get, path), 60)
    for ns in (NS, stack.NAMESPACE):
        rest.create("/api/v1/namespaces", {"metadata": {"name": ns}}, exist_ok=True)


def start(
    kind: str, c: Cluster, work: Path, qps: float, burst: int, prof: Path | None, trace: Path | None = None
) -> tuple[list[Started], float, str]:
    """The scheduler(s) of ``kind``; (processes measured, start time, a note). ``prof``: koord-scheduler
    runs under cProfile, its stats written there when it stops; ``trace``: with its stage marks."""
    if kind in ("kube", "kube-json", "kube-http1"):
        t0 = time.time()
        kube = start_kube_scheduler(c, work, qps, burst, json=kind == "kube-json", http1=kind == "kube-http1")
        return [kube], t0, ""
    if kind in ("koord", "koord-profile"):
        t0 = time.time()
        profile = "koordinator" if kind == "koord-profile" else "default"
        return [start_koord_scheduler(c, work, profile, qps, burst, prof, trace)], t0, ""
    began = time.time()
    ext, port = start_extender(c, work)
    ready = time.time() - began
    t0 = time.time()
    kube = start_kube_scheduler(c, work, qps, burst, extender_port=port)
    return [kube, ext], t0, f"extender ready {ready:.1f}s before kube-scheduler started"
