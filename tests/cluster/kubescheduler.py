"""A stand-in for kube-scheduler driving HTTP extenders, close enough to judge an extender by.

It does what kube-scheduler does with extenders (Kubernetes' ``pkg/scheduler/schedule_one.go`` and
``extender.go``): in-tree filtering (node ready and schedulable, NodeResourcesFit on requests), then each
interested extender's filter in config order on the survivors (``FailedNodes``/``FailedAndUnresolvableNodes``,
names checked against the input when cache-capable, ``null`` lists dropping every node); one feasible node is
chosen without prioritize; otherwise in-tree scores (NodeResourcesFit LeastAllocated and BalancedAllocation,
weight 1 each, 0..100) plus ``score * weight * 10`` from every extender's prioritize (run in parallel, errors
ignored); the highest total wins and ties are broken at random (seeded). The pod is then assumed (its requests
count at once) and bound by the first binder extender (falling back to the default binder when that fails and
the extender is ignorable), else by a ``pods/binding`` POST of its own; binding runs on a thread, as
kube-scheduler's binding cycle does, unless ``async_binding`` is off. A filter error fails the pod's attempt
unless the extender is ``ignorable``.

Independent of pytest: the descheduler's end-to-end tests drive it too.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import urllib.parse
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from koordshared.apis.core.resources import node_allocatable, pod_requests_list, value_of
from koordshared.kube.client import ApiError, request
from koordshared.runtime.errors import APIUnavailable

Obj = Mapping[str, Any]
MAX_NODE_SCORE = 100
MAX_EXTENDER_PRIORITY = 10
NON_ZERO_CPU = 100  # kube-scheduler scores a pod without requests as 100m / 200Mi
NON_ZERO_MEMORY = 200 * 2**20


class ExtenderError(Exception):
    pass


@dataclass(frozen=True)
class ExtenderConfig:
    """``KubeSchedulerConfiguration.extenders[]`` (the fields that change behaviour)."""

    url_prefix: str
    filter_verb: str = "filter"
    prioritize_verb: str = "prioritize"
    bind_verb: str = ""
    weight: int = 1
    node_cache_capable: bool = True
    ignorable: bool = False
    http_timeout: float = 5.0


class HTTPExtender:
    """kube-scheduler's ``HTTPExtender``: one connection, JSON in and out, non-200 is an error."""

    def __init__(self, cfg: ExtenderConfig) -> None:
        self.cfg = cfg
        self._local = threading.local()

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            url = urllib.parse.urlsplit(self.cfg.url_prefix)
            conn = http.client.HTTPConnection(
                url.hostname or "127.0.0.1", url.port or 80, timeout=self.cfg.http_timeout
            )
            self._local.conn = conn
        return conn

    def send(self, verb: str, args: Any) -> Any:
        path = urllib.parse.urlsplit(self.cfg.url_prefix.rstrip("/") + "/" + verb).path
        body = json.dumps(args).encode()
        for attempt in (0, 1):  # a kept-alive connection the server closed is retried once, as Go does
            conn = self._conn()
            try:
                conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
                break
            except (OSError, http.client.HTTPException) as err:
                conn.close()
                self._local.conn = None
                if attempt == 1 or isinstance(err, TimeoutError):
                    raise ExtenderError(f"{verb}: {err!r}") from err
        if resp.status != 200:
            raise ExtenderError(
                f"failed {verb} with extender at URL {self.cfg.url_prefix}, code {resp.status}"
            )
        return json.loads(data)

    def _args(self, pod: Obj, nodes: Sequence[Obj]) -> dict[str, Any]:
        if self.cfg.node_cache_capable:
            return {"Pod": pod, "Nodes": None, "NodeNames": [_name(n) for n in nodes]}
        return {"Pod": pod, "Nodes": {"metadata": {}, "items": list(nodes)}, "NodeNames": None}

    def filter(self, pod: Obj, nodes: Sequence[Obj]) -> tuple[list[Obj], dict[str, str], dict[str, str]]:
        if not self.cfg.filter_verb:
            return list(nodes), {}, {}
        result = self.send(self.cfg.filter_verb, self._args(pod, nodes))
        if result.get("Error"):
            raise ExtenderError(str(result["Error"]))
        by_name = {_name(n): n for n in nodes}
        passed: list[Obj] = []
        if self.cfg.node_cache_capable and result.get("NodeNames") is not None:
            for name in result["NodeNames"]:
                if name not in by_name:
                    raise ExtenderError(
                        f"extender claims a filtered node {name!r} not in the input node list"
                    )
                passed.append(by_name[name])
        elif result.get("Nodes") is not None:
            passed = list(result["Nodes"].get("items") or [])
        return (
            passed,
            dict(result.get("FailedNodes") or {}),
            dict(result.get("FailedAndUnresolvableNodes") or {}),
        )

    def prioritize(self, pod: Obj, nodes: Sequence[Obj]) -> dict[str, int]:
        if not self.cfg.prioritize_verb:
            return {}
        result = self.send(self.cfg.prioritize_verb, self._args(pod, nodes))
        return {str(h["Host"]): int(h["Score"]) for h in result}

    def bind(self, pod: Obj, node: str) -> None:
        meta = pod["metadata"]
        args = {
            "PodName": meta["name"],
            "PodNamespace": meta.get("namespace", ""),
            "PodUID": meta.get("uid", ""),
            "Node": node,
        }
        result = self.send(self.cfg.bind_verb, args)
        if result.get("Error"):
            raise ExtenderError(str(result["Error"]))


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _requests(pod: Obj) -> tuple[int, int]:
    req = pod_requests_list(pod)
    return (
        value_of("cpu", req["cpu"]) if "cpu" in req else 0,
        value_of("memory", req["memory"]) if "memory" in req else 0,
    )


def _capacity(node: Obj) -> tuple[int, int, int]:
    alloc = node_allocatable(node)
    get = lambda r: value_of(r, alloc[r]) if r in alloc else 0  # noqa: E731
    return get("cpu"), get("memory"), get("pods") or 110


@dataclass
class Outcome:
    pod: str
    node: str = ""
    reason: str = ""
    extender_scores: dict[str, int] = field(default_factory=dict)
    """Per node, the extenders' summed contribution (``score * weight * 10``)."""
    totals: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    """Nodes the extenders filtered out, with their reasons (FailedNodes and FailedAndUnresolvableNodes)."""


class KubeSchedulerSim:
    """Schedules the pending pods of ``scheduler_name``, one at a time, against the API server."""

    def __init__(
        self,
        api_client: Any,
        extenders: Sequence[ExtenderConfig] = (),
        *,
        scheduler_name: str = "default-scheduler",
        seed: int = 0,
        async_binding: bool = True,
    ) -> None:
        self.api = api_client
        self.extenders = [HTTPExtender(cfg) for cfg in extenders]
        self.scheduler_name = scheduler_name
        self.rng = random.Random(seed)
        self.async_binding = async_binding
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="sim-kube-scheduler")
        self._lock = threading.Lock()
        self._requested: dict[str, list[int]] = {}
        """Per node: cpu, memory, pods requested by pods bound or assumed there, then cpu and memory with
        kube-scheduler's non-zero defaults (what scoring counts)."""
        self._bindings: list[Any] = []

    # ---- cluster state ----------------------------------------------------------------------------

    def _list(self, path: str) -> list[Obj]:
        doc = request(self.api, f"list {path}", "GET", path)
        return list(doc.get("items") or [])

    def refresh(self) -> list[Obj]:
        """Nodes from the API; requested resources from the bound pods (assumed ones are kept)."""
        nodes = self._list("/api/v1/nodes")
        with self._lock:
            self._requested = {_name(n): [0, 0, 0, 0, 0] for n in nodes}
        for p in self._list("/api/v1/pods"):
            node = (p.get("spec") or {}).get("nodeName")
            if node in self._requested and (p.get("status") or {}).get("phase") not in (
                "Succeeded",
                "Failed",
            ):
                self._assume(p, node)
        return nodes

    def pending(self) -> list[Obj]:
        pods = [
            p
            for p in self._list("/api/v1/pods")
            if not (p.get("spec") or {}).get("nodeName")
            and (p.get("spec") or {}).get("schedulerName", "default-scheduler") == self.scheduler_name
        ]
        return sorted(
            pods, key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"])
        )

    # ---- in-tree plugins --------------------------------------------------------------------------

    def _fits(self, pod: Obj, node: Obj) -> str:
        if (node.get("spec") or {}).get("unschedulable"):
            return "node(s) were unschedulable"
        ready = [c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
        if ready and ready[0].get("status") != "True":
            return "node(s) were not ready"
        cpu, mem = _requests(pod)
        cap = _capacity(node)
        used = self._requested.get(_name(node), [0, 0, 0, 0, 0])
        if used[2] + 1 > cap[2]:
            return "Too many pods"
        if cpu and used[0] + cpu > cap[0]:
            return "Insufficient cpu"
        if mem and used[1] + mem > cap[1]:
            return "Insufficient memory"
        return ""

    def _in_tree_score(self, pod: Obj, node: Obj) -> int:
        cpu, mem = _requests(pod)
        cpu, mem = cpu or NON_ZERO_CPU, mem or NON_ZERO_MEMORY
        cap = _capacity(node)
        used = self._requested.get(_name(node), [0, 0, 0, 0, 0])
        fractions = []
        least = 0
        for i, req in ((0, cpu), (1, mem)):
            total = cap[i]
            want = used[3 + i] + req
            least += (total - want) * MAX_NODE_SCORE // total if total and want <= total else 0
            fractions.append(min(want / total, 1.0) if total else 1.0)
        least //= 2
        mean = sum(fractions) / 2
        std = (sum((f - mean) ** 2 for f in fractions) / 2) ** 0.5
        balanced = int((1 - std) * MAX_NODE_SCORE)
        return least + balanced

    # ---- one scheduling cycle ---------------------------------------------------------------------

    def schedule_one(self, pod: Obj, nodes: Sequence[Obj]) -> Outcome:
        name = f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"
        out = Outcome(name)
        feasible = [n for n in nodes if not self._fits(pod, n)]
        if not feasible:
            out.reason = "0 nodes fit in-tree"
            return out
        for ext in self.extenders:
            if not feasible:
                break
            try:
                feasible, failed, unresolvable = ext.filter(pod, feasible)
                out.failed.update({**failed, **unresolvable})
            except ExtenderError as err:
                if ext.cfg.ignorable:
                    continue  # "Skipping extender as it returned error and has ignorable flag set"
                out.reason = f"extender filter error: {err}"
                return out
        if not feasible:
            out.reason = "0 nodes left after extenders"
            return out
        if len(feasible) == 1:
            chosen = _name(feasible[0])
        else:
            totals = {_name(n): self._in_tree_score(pod, n) for n in feasible}
            futures = [(ext, self._pool.submit(ext.prioritize, pod, feasible)) for ext in self.extenders]
            for ext, fut in futures:
                try:
                    scores = fut.result()
                except ExtenderError:
                    continue  # a prioritize error is logged and ignored
                for host, score in scores.items():
                    if host in totals:
                        add = score * ext.cfg.weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
                        totals[host] += add
                        out.extender_scores[host] = out.extender_scores.get(host, 0) + add
            out.totals = totals
            best = max(totals.values())
            chosen = self.rng.choice(sorted(h for h, t in totals.items() if t == best))
        self._assume(pod, chosen)
        if self.async_binding:
            self._bindings.append(self._pool.submit(self._bind, pod, chosen))
        else:
            self._bind(pod, chosen)
        out.node = chosen
        return out

    def _assume(self, pod: Obj, node: str, sign: int = 1) -> None:
        cpu, mem = _requests(pod)
        with self._lock:
            acc = self._requested.setdefault(node, [0, 0, 0, 0, 0])
            acc[0] += sign * cpu
            acc[1] += sign * mem
            acc[2] += sign
            acc[3] += sign * (cpu or NON_ZERO_CPU)
            acc[4] += sign * (mem or NON_ZERO_MEMORY)

    def _bind(self, pod: Obj, node: str) -> str:
        for ext in self.extenders:
            if not ext.cfg.bind_verb:
                continue
            try:
                ext.bind(pod, node)
                return node
            except ExtenderError:
                if not ext.cfg.ignorable:
                    self._assume(pod, node, -1)
                    return ""
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta.get("uid")},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding"
        try:
            request(self.api, "bind", "POST", path, body=body)
        except (ApiError, APIUnavailable):
            self._assume(pod, node, -1)
            return ""
        return node

    def wait_bindings(self) -> None:
        for fut in self._bindings:
            fut.result()
        self._bindings = []

    def schedule_pending(self, limit: int | None = None) -> list[Outcome]:
        """Schedule every pending pod once, in creation order; bindings are awaited at the end."""
        nodes = self.refresh()
        outcomes = [self.schedule_one(p, nodes) for p in self.pending()[:limit]]
        self.wait_bindings()
        return outcomes

    def close(self) -> None:
        self.wait_bindings()
        self._pool.shutdown(wait=True)
