"""The descheduler plugin author's harness: a plugin in the real framework over in-memory caches and a fake
clock, with a recording Evict/Filter plugin in place of MigrationController, so a test adds nodes, pods
and NodeMetrics, runs a round and reads what was evicted (and why).

    kit = DeschedulerHarness("EvictLabelled", {"label": "example.com/evict"}, point="deschedule",
                             plugins={"EvictLabelled": EvictLabelled})
    kit.informers.nodes.put(node("a"))
    kit.informers.pods.put(pod("web", node_name="a", labels={"example.com/evict": "true"}))
    assert kit.round() == ["default/web"]

Builders and the clock come from :mod:`koordshared.testing`. Nothing of the descheduler imports this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord.descheduler.app import plugin_registry
from koord.descheduler.framework import EvictionRefused, EvictOptions, Obj, PluginFactory
from koord.descheduler.framework.profile import parse_profiles
from koord.descheduler.framework.runtime import Environment, Framework, RoundLimiter, RoundLimits
from koord.descheduler.informers import MemoryInformers
from koordshared.apis.core.node import is_ready
from koordshared.apis.core.pod import pod_key
from koordshared.testing.clock import FakeClock


@dataclass
class Recorder:
    """Evict and Filter plugin: records every eviction and removes the pod from the cache (as a kubelet
    confirming the deletion would); ``refuse`` names pods to refuse (as a PodDisruptionBudget would),
    ``unevictable`` pods its filter turns away."""

    informers: MemoryInformers
    name: str = "Recorder"
    evicted: list[tuple[str, str, EvictOptions]] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)
    unevictable: set[str] = field(default_factory=set)

    def filter(self, pod: Obj) -> bool:
        return pod_key(pod) not in self.unevictable

    def evict(self, pod: Obj, options: EvictOptions) -> bool:
        key = pod_key(pod)
        if key in self.refuse:
            raise EvictionRefused("pdb", f"{key} is protected")
        self.evicted.append((key, str(pod["spec"].get("nodeName")), options))
        if not options.dry_run:
            self.informers.pods.remove(key)
        return True

    def keys(self) -> list[str]:
        return [k for k, _, _ in self.evicted]


class Counter:
    """The framework's eviction counter, recording ``(result, node)``."""

    def __init__(self) -> None:
        self.results: list[tuple[str, str]] = []

    def evicted(self, result: str, plugin: str, namespace: str, node: str) -> None:
        self.results.append((result, node))

    def plugin_call(self, profile: str, plugin: str, point: str, seconds: float, failed: bool) -> None:
        pass


class NoEvents:
    def event(self, obj: Obj, type_: str, reason: str, message: str, *, action: str = "Descheduling") -> None:
        pass


class DeschedulerHarness:
    """``plugin`` enabled at ``point`` with ``args``, the Recorder as the profile's Evict and Filter
    plugin; ``plugins`` registers factories beside the built-ins (a third-party plugin under test)."""

    def __init__(
        self,
        plugin: str,
        args: Mapping[str, Any] | None = None,
        *,
        point: str = "balance",
        plugins: Mapping[str, PluginFactory] | None = None,
        dry_run: bool = False,
        limits: RoundLimits | None = None,
        interval: float = 10.0,
    ) -> None:
        self.clock = FakeClock()
        self.informers = MemoryInformers()
        self.recorder = Recorder(self.informers)
        self.counter = Counter()
        registry = plugin_registry(entry_points=lambda: [])
        for name, factory in (plugins or {}).items():
            registry.register(name, factory)
        registry.register("Recorder", lambda _args, _handle: self.recorder)
        profile = parse_profiles(
            [
                {
                    "name": "test",
                    "plugins": {
                        point: {"enabled": [{"name": plugin}]},
                        "evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "Recorder"}]},
                        "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "Recorder"}]},
                    },
                    "pluginConfig": [{"name": plugin, "args": dict(args or {})}],
                }
            ],
            "profiles",
        )[0]
        self.env = Environment(
            client=None,
            informers=self.informers,
            recorder=NoEvents(),
            dry_run=dry_run,
            interval=interval,
            limiter=RoundLimiter(limits or RoundLimits()),
            counter=self.counter,
            now=self.clock.wall,
            monotonic=self.clock,
        )
        self.framework = Framework(profile, registry, self.env)
        self.plugin: Any = self.framework.plugins[plugin]

    def nodes(self) -> list[Obj]:
        """The Ready nodes, as a round takes them."""
        return [n for n in self.informers.nodes.objects() if is_ready(n)]

    def round(self, *, advance: float = 10.0) -> list[str]:
        """One round: every Deschedule, then every Balance plugin; the pods evicted, in order. A plugin
        that fails fails the test (its error is raised)."""
        before = len(self.recorder.evicted)
        self.env.limiter.reset()
        self.framework.begin_round()
        errors = self.framework.run_deschedule(self.nodes()) + self.framework.run_balance(self.nodes())
        if errors:
            raise AssertionError("; ".join(errors))
        self.clock.advance(advance)
        return [k for k, _, _ in self.recorder.evicted[before:]]
