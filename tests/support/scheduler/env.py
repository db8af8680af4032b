"""A LoadAware plugin over in-memory caches and a fake clock, for filter/score tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koord.scheduler.extender.handle import ExtenderHandle
from koord.scheduler.framework import CycleState, Status
from koord.scheduler.plugins.loadaware import LoadAwareScheduling
from koordshared.kube.memstore import MemoryStore
from koordshared.testing import FakeClock, objects


class Env:
    def __init__(self, args: Mapping[str, Any] | None = None, clock: FakeClock | None = None) -> None:
        self.clock = clock or FakeClock()
        self.nodes = MemoryStore()
        self.pods = MemoryStore()
        self.metrics = MemoryStore()
        self.handle = ExtenderHandle(self.nodes, self.pods, self.metrics, clock=self.clock.wall)
        self.plugin = LoadAwareScheduling(args, self.handle)

    @property
    def now(self) -> float:
        return self.clock.wall()

    def add_node(self, name: str, cpu: str = "16", memory: str = "64Gi", **kw: Any) -> None:
        self.nodes.put(objects.node(name, cpu, memory, **kw))

    def report(self, name: str, age: float = 10.0, **kw: Any) -> None:
        """A NodeMetric for ``name`` whose updateTime is ``age`` seconds ago."""
        self.metrics.put(objects.node_metric(name, update_time=self.now - age, **kw))

    def filter(self, pod: Mapping[str, Any], node: str) -> Status | None:
        state = CycleState()
        self.plugin.pre_filter(state, pod)
        with self.handle.cycle():
            info = self.handle.node_info(node)
            assert info is not None
            return self.plugin.filter(state, pod, info)

    def reason(self, pod: Mapping[str, Any], node: str) -> str:
        st = self.filter(pod, node)
        return "" if st is None else st.message

    def score(self, pod: Mapping[str, Any], node: str) -> int:
        state = CycleState()
        with self.handle.cycle():
            info = self.handle.node_info(node)
            assert info is not None
            return self.plugin.score(state, pod, info)
