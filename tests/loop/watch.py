"""What the loop reads back from the API server while it runs, narrated as it changes: each node's
reported load (NodeMetric: system usage plus the reported pods, over the node's allocatable), the
manager's objects, the Descheduled Events; and the one controller the loop plays itself, a ReplicaSet
that replaces its evicted pods with unbound ones for the scheduler to place.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from koordshared.apis.core.resources import node_allocatable, value_of
from koordshared.apis.slo.nodemetric import parse_status
from koordshared.kube.client import ApiError, request
from koordshared.runtime.errors import APIUnavailable
from tests.loop import configs

Say = Callable[[str, str], None]
NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"


def reported_cpu(node_metric: dict[str, Any], pods: set[str] | None = None) -> tuple[int, int, float | None]:
    """(cpu millicores, pods reported, updateTime) as LowNodeLoad counts them: system usage plus the
    reported pods (only those in ``pods`` when given)."""
    st = parse_status(node_metric.get("status"))
    reported = [p for p in st.pods_metric if pods is None or f"{p.namespace}/{p.name}" in pods]
    system = st.system_usage.cpu_milli if st.system_usage else 0
    return system + sum(p.usage.cpu_milli for p in reported), len(reported), st.update_time


class Watcher:
    def __init__(self, api: Any, say: Say) -> None:
        self.api = api
        self.say = say
        self.capacity: dict[str, int] = {}
        self.metrics: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.replacements: dict[str, str] = {}
        """replacement pod -> the evicted pod it replaces."""
        self._shown: dict[str | tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def _get(self, path: str) -> list[dict[str, Any]]:
        return list((request(self.api, f"list {path}", "GET", path, timeout=5) or {}).get("items") or [])

    def poll(self) -> None:
        nodes = {n["metadata"]["name"]: n for n in self._get("/api/v1/nodes")}
        pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in self._get("/api/v1/pods")}
        metrics = {m["metadata"]["name"]: m for m in self._get(NODEMETRICS)}
        events = [e for e in self._get("/api/v1/events") if e.get("reason") == "Descheduled"]
        with self._lock:
            self.capacity = {
                n: value_of("cpu", node_allocatable(o).get("cpu", Fraction(0))) for n, o in nodes.items()
            }
            gone = [k for k in self.pods if k not in pods]
            self.pods, self.metrics = pods, metrics
        self._narrate(metrics, events)
        for key in gone:
            self._replace(key)

    def _narrate(self, metrics: dict[str, dict[str, Any]], events: list[dict[str, Any]]) -> None:
        for name in sorted(metrics):
            if ("nm", name) not in self._shown:
                self._shown[("nm", name)] = True
                self.say("koord-manager", f"created NodeMetric and NodeSLO for {name}")
        parts = []
        for name, m in sorted(metrics.items()):
            cpu, n, updated = reported_cpu(m)
            if updated is None:
                continue
            pct = 100.0 * cpu / self.capacity[name] if self.capacity.get(name) else 0.0
            parts.append((name, round(pct / 5) * 5, f"{name} {pct:.0f}% cpu ({n} pods)"))
        key = tuple((n, p) for n, p, _ in parts)
        if parts and key != self._shown.get("load"):
            self._shown["load"] = key
            self.say("koordlets", "NodeMetric reports " + ", ".join(t for _, _, t in parts))
        for e in events:
            uid = e["metadata"]["name"]
            if uid not in self._shown:
                self._shown[uid] = True
                self.events.append(e)
                obj = e.get("involvedObject") or {}
                self.say(
                    "api-server",
                    f"Event Descheduled on {obj.get('namespace')}/{obj.get('name')}: {e.get('message')}",
                )

    def _replace(self, key: str) -> None:
        """The ReplicaSet's part: a pod of ours that is gone gets an unbound replacement."""
        old = self._shown.pop(("owned", key), None)
        if old is None:
            return
        ns, name = key.split("/")
        new = configs.pod(f"{name}-r", busy=old["busy"], priority_class=old["class"], qos="BE", owned=True)
        try:
            request(
                self.api, "create replacement", "POST", f"/api/v1/namespaces/{ns}/pods", body=new, timeout=5
            )
        except (ApiError, APIUnavailable) as err:
            self.say("replicaset", f"could not replace {key}: {err}")
            return
        self.replacements[f"{ns}/{name}-r"] = key
        self.say("replicaset", f"{key} is gone: created {ns}/{name}-r (unbound) to replace it")

    def own(self, pod: dict[str, Any]) -> None:
        """Replace this pod when it goes (it belongs to the loop's ReplicaSet)."""
        meta = pod["metadata"]
        self._shown[("owned", f"{meta['namespace']}/{meta['name']}")] = {
            "busy": meta["annotations"][configs.BUSY],
            "class": meta["labels"]["koordinator.sh/priority-class"],
        }

    # ---- reading ------------------------------------------------------------------------------------

    def node_cpu(self, node: str, *, live_only: bool = False) -> tuple[int, int, float | None]:
        with self._lock:
            m = self.metrics.get(node)
            pods = {k for k, p in self.pods.items() if (p.get("spec") or {}).get("nodeName") == node}
        if m is None:
            return 0, 0, None
        return reported_cpu(m, pods if live_only else None)

    def pod_cpu(self, node: str) -> dict[str, int]:
        """Each pod's reported cpu (millicores) in the node's NodeMetric."""
        with self._lock:
            m = self.metrics.get(node) or {}
        st = parse_status(m.get("status"))
        return {f"{p.namespace}/{p.name}": p.usage.cpu_milli for p in st.pods_metric}

    def pod(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self.pods.get(key)

    # ---- lifecycle ----------------------------------------------------------------------------------

    def start(self, stop: threading.Event) -> None:
        def loop() -> None:
            while not stop.wait(0.5):
                try:
                    self.poll()
                except (ApiError, APIUnavailable) as err:
                    self.say("loop", f"API read failed: {err}")

        self.poll()
        self._thread = threading.Thread(target=loop, name="loop-watch", daemon=True)
        self._thread.start()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join(5)
