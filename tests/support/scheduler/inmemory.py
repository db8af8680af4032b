"""koord-scheduler in memory for plugin tests: the real scheduler (queue, cache, snapshot, profiles built
from a KubeSchedulerConfiguration, event handlers) over in-memory informers, with a MemoryAPI whose
bindings are fed back to the pod informer as the API server's watch would, and the plugins' own views
(``filter``: PreFilter + Filter; ``scores``: PreScore + Score + NormalizeScore of one plugin; through the
framework's cycle code)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

from koord.scheduler.app import build_frameworks, watches
from koord.scheduler.cache.cache import Cache
from koord.scheduler.config import parse_configuration
from koord.scheduler.core.api import MemoryAPI
from koord.scheduler.core.eventhandlers import EventHandlers
from koord.scheduler.core.handle import SchedulerHandle
from koord.scheduler.core.metrics import SchedulerMetrics
from koord.scheduler.core.scheduler import Scheduler, SchedulingOptions
from koord.scheduler.framework import CycleState, PodInfo
from koord.scheduler.framework.runtime import Framework
from koord.scheduler.framework.snapshot import Snapshot
from koord.scheduler.framework.waiting import WaitingPods
from koord.scheduler.plugins import plugin_registry
from koordshared.kube.informers import MemoryInformerSet

SCHEDULER = "koord-scheduler"


def only(*names: str, args: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """A KubeSchedulerConfiguration whose one profile runs ``names`` (plus the queue sort and binder)."""
    enabled = [{"name": n} for n in ("PrioritySort", *names, "DefaultBinder")]
    return {
        "profiles": [
            {
                "schedulerName": SCHEDULER,
                "plugins": {"multiPoint": {"enabled": enabled, "disabled": [{"name": "*"}]}},
                "pluginConfig": [{"name": n, "args": dict(a)} for n, a in (args or {}).items()],
            }
        ]
    }


class InMemoryScheduler:
    def __init__(self, config: Mapping[str, Any] | None = None, *, seed: int = 0) -> None:
        registry = plugin_registry(entry_points=lambda: [])
        conf = parse_configuration(config, registered=frozenset(registry.names()))
        self.informers = MemoryInformerSet(watches())
        self.pods = self.informers["pods"]
        self.nodes = self.informers["nodes"]
        self.api = MemoryAPI(on_bind=self._bound)
        self.snapshot = Snapshot()
        self.cache = Cache()
        self.waiting = WaitingPods()
        self.handle = SchedulerHandle(self.snapshot, self.informers, self.api, self.waiting)
        frameworks = build_frameworks(conf, registry, self.handle)
        self.framework: Framework = next(iter(frameworks.values()))
        self.scheduler = Scheduler(
            frameworks,
            self.api,
            SchedulerMetrics(CollectorRegistry()),
            cache=self.cache,
            snapshot=self.snapshot,
            waiting=self.waiting,
            pods=self.pods,
            options=SchedulingOptions(
                parallelism=1, pod_initial_backoff_seconds=0.01, pod_max_backoff_seconds=0.01
            ),
            seed=seed,
        )
        EventHandlers(self.scheduler).attach(self.pods, self.nodes)

    def close(self) -> None:
        self.scheduler.stop()

    def __enter__(self) -> InMemoryScheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _bound(self, pod: Mapping[str, Any], node: str) -> None:
        current = self.pods.get(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}") or pod
        bound = {**current, "spec": {**current["spec"], "nodeName": node}}
        self.pods.put(bound)

    def add(self, *objs: Mapping[str, Any]) -> None:
        for obj in objs:
            (self.nodes if obj.get("kind") == "Node" else self.pods).put(obj)

    def schedule_all(self, timeout: float = 30.0) -> None:
        """Cycles until the active queue is empty, then waits for the bindings to arrive."""
        while self.scheduler.schedule_next(timeout=0):
            pass
        deadline = time.monotonic() + timeout
        while self.cache.counts()[2] and time.monotonic() < deadline:
            time.sleep(0.005)

    def placement(self) -> dict[str, str]:
        """Pod name -> node, for every bound pod."""
        return {key.split("/", 1)[1]: node for key, node in self.api.bindings.items()}

    def failures(self) -> dict[str, str]:
        """Pod name -> the message of its last FailedScheduling event."""
        return {
            key.split("/", 1)[1]: message
            for key, _, reason, message in self.api.events
            if reason == "FailedScheduling"
        }

    # ---- one plugin's view, through the framework's cycle code ----------------------------------------

    def state(self, pod: Mapping[str, Any]) -> CycleState:
        self.cache.update_snapshot(self.snapshot)
        return CycleState(PodInfo(pod))

    def filter(self, pod: Mapping[str, Any]) -> dict[str, str]:
        """PreFilter + Filter on every node: node -> "" (passes) or the rejection message."""
        state = self.state(pod)
        _, rejected = self.framework.run_pre_filter(state, pod)
        if rejected is not None:
            return {ni.name: rejected.message for ni in self.snapshot.infos}
        found = self.framework.find_feasible(state, pod, self.snapshot.rotated(0))
        out = dict.fromkeys(found.feasible.names, "")
        out.update({n: st.message for n, st in found.statuses().items()})
        return out

    def scores(
        self, pod: Mapping[str, Any], plugin: str, nodes: Sequence[str] | None = None
    ) -> dict[str, int]:
        """PreScore on ``nodes`` (default: every node), then ``plugin``'s Score and NormalizeScore there
        (an empty dict when its PreScore skipped it)."""
        state = self.state(pod)
        every = self.snapshot.rotated(0)
        chosen = every if nodes is None else every.subset(np.array([ni.name in nodes for ni in every]))
        self.framework.run_pre_score(state, pod, chosen)
        for e, values in self.framework.plugin_scores(state, pod, chosen):
            if e.name == plugin:
                return dict(zip(chosen.names, values.tolist(), strict=True))
        return {}
