"""What the benchmarks that run schedulers against a real kube-apiserver share: the pod they place,
kube-apiserver's audit log read back (pod creates, bindings, and every request by client), the
schedulers' processes started against a :class:`~tests.realcluster.cluster.Cluster`, their CPU and memory
from ``/proc``, and the drain of a backlog timed on the server's clock.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from tests.realcluster import binaries
from tests.realcluster.procs import Started

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "scheduler"
NS = "bench"
SCHEDULER = "default-scheduler"
AUDIT_ALL = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}
"""Every request at Metadata level: who sent what (the request rate per client)."""


ZONE = "topology.kubernetes.io/zone"
WORKLOADS = ("basic", "anti-affinity", "spread", "node-affinity")
"""The pod shapes of scheduler_perf's SchedulingBasic, SchedulingPodAntiAffinity, TopologySpreading and
SchedulingNodeAffinity (``templates/pod-*.yaml``), over nodes in three zones ``zone-0..2``."""


def pod(name: str, scheduler: str = SCHEDULER, workload: str = "basic") -> dict[str, Any]:
    """scheduler_perf's ``pod-default.yaml`` (named, not generated), shaped as ``workload``'s pods:
    ``anti-affinity`` one per node (required anti-affinity on the host name among its kind),
    ``spread`` across zones (maxSkew 5, DoNotSchedule), ``node-affinity`` on two of the three zones."""
    res = {"cpu": "100m", "memory": "500Mi"}
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "pause",
                    "image": "registry.k8s.io/pause:3.10.1",
                    "ports": [{"containerPort": 80}],
                    "resources": {"requests": res, "limits": res},
                }
            ],
        },
    }
    spec: dict[str, Any] = doc["spec"]
    meta: dict[str, Any] = doc["metadata"]
    if workload == "anti-affinity":
        meta["labels"] = {"color": "green"}
        term = {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "kubernetes.io/hostname"}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    elif workload == "spread":
        meta["labels"] = {"color": "blue"}
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 5,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"color": "blue"}},
            }
        ]
    elif workload == "node-affinity":
        zones = {"key": ZONE, "operator": "In", "values": ["zone-0", "zone-1"]}
        required = {"nodeSelectorTerms": [{"matchExpressions": [zones]}]}
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    elif workload != "basic":
        raise ValueError(f"unknown workload {workload!r}: one of {', '.join(WORKLOADS)}")
    return doc


# -- the audit log: kube-apiserver's timestamps of pod creates and bindings


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def client(user_agent: str) -> str:
    """A request's client, by its user agent's product (``kube-scheduler/v1.34.4 (linux/amd64) ...`` ->
    ``kube-scheduler``); kube-controller-manager's controllers stay one client."""
    return user_agent.split("/", 1)[0].split(" ", 1)[0] or "(none)"


@dataclass
class Audit:
    """Follows the audit log: each pod's create, first successful binding and delete in namespace ``NS``
    (server time); with ``requests``, every finished request as (time, client, verb, resource) too."""

    path: Path
    offset: int = 0
    created: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)
    bind_received: dict[str, float] = field(default_factory=dict)
    """When kube-apiserver received each pod's first successful binding (the bind's own time follows)."""
    binds: int = 0
    """Successful bindings, repeats included (a repeat would be a scheduler binding a pod twice)."""
    failed_binds: int = 0
    deleted: dict[str, float] = field(default_factory=dict)
    """Each pod's last delete request that succeeded (a graceful one only marks it)."""
    requests: list[tuple[float, str, str, str]] | None = None

    def rates(self, t0: float, t1: float) -> dict[str, Counter[str]]:
        """Requests per client between ``t0`` and ``t1`` (server time), by ``verb resource``."""
        out: dict[str, Counter[str]] = {}
        for t, who, verb, res in self.requests or ():
            if t0 <= t < t1:
                out.setdefault(who, Counter())[f"{verb} {res}"] += 1
        return out

    def has_bound(self, *names: str) -> bool:
        """Every pod of ``names`` bound, after reading what the log has gained."""
        self.read()
        return all(n in self.bound for n in names)

    def read(self) -> None:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            ev = json.loads(line)
            ref = ev.get("objectRef") or {}
            code = (ev.get("responseStatus") or {}).get("code", 0)
            if self.requests is not None and ev.get("stage") == "ResponseComplete":
                res = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
                who = client(ev.get("userAgent", ""))
                self.requests.append((_ts(ev["stageTimestamp"]), who, ev.get("verb", ""), res))
            if ref.get("namespace") != NS or ref.get("resource") not in ("pods", "bindings"):
                continue
            name, verb, sub = ref.get("name", ""), ev.get("verb"), ref.get("subresource")
            if verb == "create" and (sub == "binding" or ref.get("resource") == "bindings"):
                if code == 201:
                    self.binds += 1
                    self.bound.setdefault(name, _ts(ev["stageTimestamp"]))
                    self.bind_received.setdefault(name, _ts(ev["requestReceivedTimestamp"]))
                else:
                    self.failed_binds += 1
            elif verb == "create" and not sub and code == 201:
                self.created[name] = _ts(ev["stageTimestamp"])
            elif verb == "delete" and not sub and code == 200:
                self.deleted[name] = _ts(ev["stageTimestamp"])


# -- processes


def unmet() -> str:
    """Why the benchmarks on a real control plane cannot run here (empty: they can): the Kubernetes
    binaries (built with Go when the cache lacks them), openssl for the certificates, kubectl."""
    missing = [t for t in ("openssl", "kubectl") if shutil.which(t) is None]
    if missing:
        return f"needs {' and '.join(missing)}"
    try:
        binaries.build()
    except binaries.BuildError as err:
        return str(err)
    return ""


def skipped(bench: str, why: str) -> None:
    """Say why a bench did not run, on the console and in its JSON line."""
    print(f"{bench}: skipped: {why}")
    print(json.dumps({"bench": bench, "skipped": why}))


def _tree(p: Started) -> list[psutil.Process]:
    """The process and its descendants (a component under the restarting supervisor is its child)."""
    try:
        root = psutil.Process(p.pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def cpu_seconds(procs: list[Started]) -> float:
    """User + system CPU of ``procs`` and their descendants, seconds."""
    total = 0.0
    for p in procs:
        for proc in _tree(p):
            with contextlib.suppress(psutil.Error):
                t = proc.cpu_times()
                total += t.user + t.system
    return total


def rss_mib(procs: list[Started]) -> tuple[float, float]:
    """(RSS now, peak RSS) summed over ``procs`` and their descendants, MiB."""
    now = peak = 0.0
    for p in procs:
        for proc in _tree(p):
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        now += int(line.split()[1]) / 1024
                    elif line.startswith("VmHWM:"):
                        peak += int(line.split()[1]) / 1024
    return round(now, 1), round(peak, 1)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))] if s else float("nan")


def drain(
    audit: Audit, procs: list[Started], api: list[Started], pods: int, timeout: float
) -> dict[str, Any]:
    """Wait until every backlog pod is bound; CPU samples to cut the drain's share out."""
    samples: list[tuple[float, float, float]] = []
    deadline = time.monotonic() + timeout
    while True:
        audit.read()
        samples.append((time.time(), cpu_seconds(procs), cpu_seconds(api)))
        done = sum(1 for n in audit.bound if n.startswith("p-"))
        if done >= pods:
            break
        for p in procs:
            if not p.running():
                raise RuntimeError(f"{p.name} exited during the drain; its log ends:\n{p.tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{done}/{pods} pods bound after {timeout:.0f}s")
        time.sleep(0.1)
    times = sorted(t for n, t in audit.bound.items() if n.startswith("p-"))
    first, last = times[0], times[-1]

    def at(t: float) -> tuple[float, float]:
        best = min(samples, key=lambda s: abs(s[0] - t))
        return best[1], best[2]

    (s0, a0), (s1, a1) = at(first), at(last)
    return {
        "first": first,
        "last": last,
        "cpu_total": samples[-1][1],
        "cpu_ms_per_pod": round((s1 - s0) * 1000 / pods, 2),
        "api_ms_per_pod": round((a1 - a0) * 1000 / pods, 2),
    }
