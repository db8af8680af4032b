"""LowNodeLoad (or any descheduler plugin) in a real framework over in-memory caches and a fake clock,
with a recording Evict/Filter plugin in place of MigrationController, for hand-computed tests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord.apis.node import is_ready
from koord.apis.pod import pod_key
from koord.apis.timefmt import format_time
from koord.descheduler.app import plugin_registry
from koord.descheduler.framework import EvictionRefused, EvictOptions, Obj
from koord.descheduler.framework.profile import parse_profiles
from koord.descheduler.framework.runtime import Environment, Framework, RoundLimiter, RoundLimits
from koord.descheduler.informers import MemoryInformers
from koordlet.testing.clock import FakeClock
from tests.cluster import objects

GiB = 2**30


@dataclass
class Recorder:
    """Evict and Filter plugin: records every eviction and removes the pod from the cache (as a kubelet
    confirming the deletion would); ``refuse`` names pods to refuse (as a PodDisruptionBudget would)."""

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
    def __init__(self) -> None:
        self.results: list[tuple[str, str]] = []

    def evicted(self, result: str, plugin: str, namespace: str, node: str) -> None:
        self.results.append((result, node))

    def plugin_call(self, profile: str, plugin: str, point: str, seconds: float, failed: bool) -> None:
        pass


class NoEvents:
    def event(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        pass


class Env:
    """Nodes and pods are added with their usage; :meth:`report` writes each node's NodeMetric from them."""

    def __init__(
        self,
        args: Mapping[str, Any] | None = None,
        *,
        plugin: str = "LowNodeLoad",
        point: str = "balance",
        dry_run: bool = False,
        limits: RoundLimits | None = None,
        interval: float = 10.0,
    ) -> None:
        self.clock = FakeClock()
        self.informers = MemoryInformers()
        self.recorder = Recorder(self.informers)
        self.counter = Counter()
        registry = plugin_registry(entry_points=lambda: [])
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
        self.usage: dict[str, dict[str, tuple[int, int]]] = {}
        self.system: dict[str, tuple[int, int]] = {}
        self._created = 0.0

    def node(
        self, name: str, cpu: str = "10", memory: str = "100Gi", system: tuple[int, int] = (0, 0), **kw: Any
    ) -> None:
        self.informers.nodes.put(objects.node(name, cpu, memory, **kw))
        self.usage.setdefault(name, {})
        self.system[name] = system

    def pod(
        self,
        name: str,
        node: str,
        cpu: int = 0,
        memory: int = 0,
        *,
        reported: bool = True,
        created: float | None = None,
        namespace: str = "default",
        **kw: Any,
    ) -> Obj:
        """A bound, running pod using ``cpu`` millicores and ``memory`` bytes (reported in the NodeMetric
        unless ``reported`` is false); pods are created one second apart unless ``created`` is given."""
        p = objects.pod(name, namespace=namespace, node_name=node, phase="Running", **kw)
        self._created += 1.0
        p["metadata"]["creationTimestamp"] = format_time(
            created if created is not None else 1_600_000_000 + self._created
        )
        self.informers.pods.put(p)
        if reported:
            self.usage[node][f"{namespace}/{name}"] = (cpu, memory)
        return p

    def report(self, *, age: float = 10.0) -> None:
        """Every node's NodeMetric: its system usage plus its pods' usage (pods evicted since are gone)."""
        for node, pods in self.usage.items():
            live = {k: v for k, v in pods.items() if self.informers.pods.get(k) is not None}
            self.usage[node] = live
            status_pods = [(k.split("/")[0], k.split("/")[1], c, m, "") for k, (c, m) in live.items()]
            nm = objects.node_metric(
                node, update_time=self.clock.wall() - age, pods=status_pods, system=self.system[node]
            )
            self.informers.node_metrics.put(nm)

    def nodes(self) -> list[Obj]:
        return [n for n in self.informers.nodes.objects() if is_ready(n)]

    def round(self, *, report: bool = True, advance: float = 10.0) -> list[str]:
        """One round (after a fresh report); the pods it evicted, in order."""
        if report:
            self.report()
        before = len(self.recorder.evicted)
        self.env.limiter.reset()
        self.framework.begin_round()
        errors = self.framework.run_deschedule(self.nodes()) + self.framework.run_balance(self.nodes())
        assert not errors, errors
        self.clock.advance(advance)
        return [k for k, _, _ in self.recorder.evicted[before:]]
