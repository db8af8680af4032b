"""LowNodeLoad (or any descheduler plugin) in the plugin author's harness (koord.descheduler.testing), with
each node's NodeMetric written from the usage its pods are given, for hand-computed tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koord.descheduler.framework import Obj
from koord.descheduler.framework.runtime import RoundLimits
from koord.descheduler.testing import DeschedulerHarness
from koordshared.apis.meta.quantity import format_time
from koordshared.testing import objects

GiB = 2**30


class Env(DeschedulerHarness):
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
        super().__init__(plugin, args, point=point, dry_run=dry_run, limits=limits, interval=interval)
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

    def round(self, *, report: bool = True, advance: float = 10.0) -> list[str]:
        """One round (after a fresh report); the pods it evicted, in order."""
        if report:
            self.report()
        return super().round(advance=advance)
