"""The scheduler plugin author's harness: a profile's plugins in the real framework over in-memory caches
and a fake clock, so a test adds nodes, pods and NodeMetrics and asks what the framework says of a pod.

    kit = SchedulerHarness({"plugins": {"multiPoint": {"enabled": [{"name": "AvoidLabel"}]}},
                            "pluginConfig": [{"name": "AvoidLabel", "args": {"label": "x"}}]},
                           plugins={"AvoidLabel": AvoidLabel})
    kit.nodes.put(node("a", labels={"x": ""}))
    kit.nodes.put(node("b"))
    assert kit.filter(pod("p")) == {"a": "node(s) had label x", "b": ""}

The profile is one entry of a KubeSchedulerConfiguration's ``profiles`` (the default profile keeps
LoadAwareScheduling at multiPoint; disable it there with ``{"disabled": [{"name": "*"}]}``). Builders and
the clock come from :mod:`koord.testing`. Nothing of the scheduler imports this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koord.kube.informers import MemoryInformerSet
from koord.scheduler.extender.handle import ExtenderHandle, extender_watches
from koord.scheduler.framework import Obj, PluginFactory, verdicts
from koord.scheduler.framework.profile import parse_profile
from koord.scheduler.framework.registry import discover
from koord.scheduler.framework.runtime import Framework
from koord.scheduler.plugins import BUILTIN
from koord.testing.clock import FakeClock


class SchedulerHarness:
    """``profile`` (default: the default profile) with ``plugins`` registered beside the built-ins."""

    def __init__(
        self,
        profile: Mapping[str, Any] | None = None,
        *,
        plugins: Mapping[str, PluginFactory] | None = None,
        clock: FakeClock | None = None,
    ) -> None:
        self.clock = clock or FakeClock()
        self.informers = MemoryInformerSet(extender_watches())
        self.nodes = self.informers["nodes"]
        self.pods = self.informers["pods"]
        self.node_metrics = self.informers["nodemetrics"]
        self.handle = ExtenderHandle(self.nodes, self.pods, self.node_metrics, clock=self.clock.wall)
        registry = discover(BUILTIN, entry_points=lambda: [])
        for name, factory in (plugins or {}).items():
            registry.register(name, factory)
        self.framework = Framework(parse_profile({"profiles": [dict(profile or {})]}), registry, self.handle)

    def plugin(self, name: str) -> Any:
        """The built plugin called ``name``."""
        return self.framework.instances[name]

    def filter(self, pod: Obj, nodes: Sequence[str] | None = None) -> dict[str, str]:
        """PreFilter then Filter over ``nodes`` (default: every cached node): node -> "" when it passes,
        else the reason of the first plugin that rejects it."""
        with self.handle.cycle():
            infos = self._infos(nodes)
            out = verdicts.run_filter(self.framework, verdicts.new_state(pod), pod, infos)
        return {ni.name: out.failed.get(ni.name) or out.unresolvable.get(ni.name) or "" for ni in infos}

    def scores(self, pod: Obj, nodes: Sequence[str] | None = None) -> dict[str, int]:
        """The combined score of every node of ``nodes`` that passes the filter (0..10, as ``/prioritize``
        answers)."""
        state = verdicts.new_state(pod)
        with self.handle.cycle():
            infos = self._infos(nodes)
            passed = set(verdicts.run_filter(self.framework, state, pod, infos).passed)
            if not passed:
                return {}
            return verdicts.run_score(self.framework, state, pod, [ni for ni in infos if ni.name in passed])

    def explain(self, pod: Obj, node: str) -> dict[str, Any]:
        """Each plugin's verdict and normalised score for ``node`` (the framework's explanation)."""
        with self.handle.cycle():
            return verdicts.explain(self.framework, pod, self._infos(None), [node])[node]

    def _infos(self, nodes: Sequence[str] | None) -> list[Any]:
        """The snapshot's NodeInfos (call inside ``handle.cycle()``)."""
        if nodes is None:
            return list(self.handle.node_infos())
        return [info for n in nodes if (info := self.handle.node_info(n)) is not None]
