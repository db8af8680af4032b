"""koord-scheduler's real core (queue, cache, snapshot, frameworks of the default profile, event handlers)
over in-memory caches, with what the API server would do with the scheduler's writes fed back into the
pod cache: bindings, status patches (conditions, ``nominatedNodeName``) and deletions (at once, or
graceful: the pod stays, terminating). The queue runs on a fake clock, so backoffs pass at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from koord.scheduler import app
from koord.scheduler.cache.cache import Cache
from koord.scheduler.config import parse_configuration
from koord.scheduler.core.api import APIFailed, MemoryAPI
from koord.scheduler.core.eventhandlers import EventHandlers
from koord.scheduler.core.handle import SchedulerHandle
from koord.scheduler.core.metrics import SchedulerMetrics
from koord.scheduler.core.scheduler import Scheduler
from koord.scheduler.framework.snapshot import Snapshot
from koord.scheduler.framework.waiting import WaitingPods
from koord.scheduler.plugins import plugin_registry
from koordshared.kube.informers import MemoryInformerSet
from koordshared.testing import FakeClock, objects

SCHEDULER = "koord-scheduler"
Obj = Mapping[str, Any]


class FeedbackAPI(MemoryAPI):
    """A MemoryAPI whose writes reach the pod cache, as the API server's watch would bring them."""

    def __init__(self, cluster: MemCluster) -> None:
        super().__init__(on_bind=cluster.bound)
        self.cluster = cluster
        self.graceful = False
        """Deleted pods stay, with a deletionTimestamp (kubelet has not confirmed yet)."""
        self.delete_gate: threading.Event | None = None
        """When set, deletions wait for it (a slow API server)."""
        self.fail_delete = ""

    def patch_status(self, pod: Obj, condition: Mapping[str, Any] | None, nominated_node: str | None) -> None:
        super().patch_status(pod, condition, nominated_node)
        current = self.cluster.pods.get(_key(pod))
        if current is None:
            raise APIFailed("not found", gone=True)
        status = dict(current.get("status") or {})
        if condition is not None:
            kept = [c for c in status.get("conditions") or () if c.get("type") != condition["type"]]
            status["conditions"] = [*kept, dict(condition)]
        if nominated_node is not None:
            if nominated_node:
                status["nominatedNodeName"] = nominated_node
            else:
                status.pop("nominatedNodeName", None)
        self.cluster.pods.put({**current, "status": status})

    def delete_pod(self, pod: Obj) -> None:
        if self.delete_gate is not None:
            self.delete_gate.wait(10)
        if self.fail_delete:
            raise APIFailed(self.fail_delete)
        super().delete_pod(pod)
        current = self.cluster.pods.get(_key(pod))
        if current is None:
            raise APIFailed("not found", gone=True)
        if self.graceful:
            meta = {**current["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}
            self.cluster.pods.put({**current, "metadata": meta})
        else:
            self.cluster.pods.remove(_key(pod))


def _key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


class MemCluster:
    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        plugins: Mapping[str, Callable[..., Any]] | None = None,
        seed: int = 0,
    ) -> None:
        self.clock = FakeClock()
        self.informers = MemoryInformerSet(app.watches())
        self.pods = self.informers["pods"]
        self.nodes = self.informers["nodes"]
        self.api = FeedbackAPI(self)
        self.cache = Cache()
        self.snapshot = Snapshot()
        waiting = WaitingPods()
        self.handle = SchedulerHandle(self.snapshot, self.informers, self.api, waiting, clock=self.clock.wall)
        registry = plugin_registry(lambda: [])
        for name, factory in (plugins or {}).items():
            registry.register(name, factory)
        conf = parse_configuration(config, registered=frozenset(registry.names()))
        frameworks = app.build_frameworks(conf, registry, self.handle)
        self.registry = CollectorRegistry()
        self.metrics = SchedulerMetrics(self.registry)
        self.scheduler = Scheduler(
            frameworks,
            self.api,
            self.metrics,
            cache=self.cache,
            snapshot=self.snapshot,
            waiting=waiting,
            pods=self.pods,
            seed=seed,
            clock=self.clock,
        )
        EventHandlers(self.scheduler).attach(self.pods, self.nodes)
        self.framework = frameworks[SCHEDULER]

    def plugin(self, name: str) -> Any:
        return self.framework.instances[name]

    def bound(self, pod: Obj, node: str) -> None:
        current = self.pods.get(_key(pod)) or pod
        spec = {**current["spec"], "nodeName": node}
        self.pods.put({**current, "spec": spec})

    # ---- objects ------------------------------------------------------------------------------

    def node(self, name: str, cpu: str = "4", memory: str = "16Gi", **kw: Any) -> None:
        self.nodes.put(objects.node(name, cpu, memory, **kw))

    def pod(
        self,
        name: str,
        cpu: str = "1",
        *,
        priority: int = 0,
        node: str = "",
        started: float | None = None,
        status: Mapping[str, Any] | None = None,
        spec: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        **kw: Any,
    ) -> Obj:
        """A pod of this scheduler (bound to ``node`` when given; ``started``: seconds before now)."""
        obj = objects.pod(
            name, requests={"cpu": cpu}, priority=priority, node_name=node, scheduler_name=SCHEDULER, **kw
        )
        if node:
            obj["status"]["phase"] = "Running"
        if started is not None:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock.wall() - started))
            obj["status"]["startTime"] = stamp
        obj["status"].update(status or {})
        obj["spec"].update(spec or {})
        obj["metadata"].update(metadata or {})
        return self.pods.put(obj)

    # ---- running --------------------------------------------------------------------------------

    def schedule(self, cycles: int = 20) -> int:
        """Scheduling cycles while pods are ready (backoffs passed); how many ran."""
        ran = 0
        for _ in range(cycles):
            self.clock.advance(11)  # past any backoff
            if not self.scheduler.schedule_next(timeout=0):
                break
            ran += 1
        return ran

    def stored(self, name: str, namespace: str = "default") -> Obj:
        """The pod as the cache holds it now (it must be there)."""
        pod = self.pods.get(f"{namespace}/{name}")
        assert pod is not None, f"no pod {namespace}/{name}"
        return pod

    def node_of(self, name: str, namespace: str = "default") -> str:
        pod = self.pods.get(f"{namespace}/{name}")
        return "" if pod is None else str(pod["spec"].get("nodeName") or "")

    def nominated(self, name: str, namespace: str = "default") -> str:
        pod = self.pods.get(f"{namespace}/{name}")
        return "" if pod is None else str((pod.get("status") or {}).get("nominatedNodeName") or "")

    def events(self, reason: str) -> list[tuple[str, str]]:
        return [(obj, msg) for obj, _, r, msg in self.api.events if r == reason]

    def failed_scheduling(self, pod: str) -> str:
        """The last FailedScheduling message of ``pod`` (waiting for one)."""
        return str(
            wait_for(lambda: [m for obj, m in self.events("FailedScheduling") if obj == f"default/{pod}"])[-1]
        )

    def attempt(self, pod: str) -> str:
        """One (failing) cycle for ``pod``; the node it was nominated to ("" when none)."""
        assert self.schedule(1) == 1
        writes = wait_for(lambda: self.api.statuses.get(f"default/{pod}"))
        return str(writes[-1][1] or "")

    def deleted(self, count: int) -> list[str]:
        """The pods deleted (waiting for ``count`` of them), sorted."""
        return sorted(wait_for(lambda: len(self.api.deleted) >= count and list(self.api.deleted)))

    def metric(self, name: str) -> float | None:
        return self.registry.get_sample_value(name)

    def close(self) -> None:
        self.scheduler.stop()


def wait_for(cond: Callable[[], Any], timeout: float = 10.0) -> Any:
    """``cond()`` once it is truthy (the scheduler's binding, status and preemption threads run beside)."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value or time.monotonic() > deadline:
            assert value, "condition not met in time"
            return value
        time.sleep(0.005)


def pdb(name: str, allowed: int, labels: dict[str, str], disrupted: tuple[str, ...] = ()) -> dict[str, Any]:
    """A PodDisruptionBudget of the default namespace, with its status."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": labels}},
        "status": {
            "disruptionsAllowed": allowed,
            "disruptedPods": {p: "2026-01-01T00:00:00Z" for p in disrupted},
        },
    }
