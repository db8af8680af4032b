"""A counter exposed under its exact name, as Go's Prometheus client exposes one (no ``_total``).

Dashboards built on Koordinator's ``slo_controller_*_count`` or ``descheduler_pods_evicted`` look the
series up by those names, while prometheus_client appends ``_total`` to every ``Counter``. The family is
typed ``unknown`` (a ``counter`` family would be announced as ``<name>_total`` by the text format).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector


class GoCounter(Collector):
    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._lock = threading.Lock()
        self._values: dict[tuple[str, ...], float] = {}
        registry.register(self)

    def _key(self, labels: dict[str, str]) -> tuple[str, ...]:
        if set(labels) != set(self.labelnames):
            raise ValueError(f"{self.name}: want labels {self.labelnames}, got {sorted(labels)}")
        return tuple(str(labels[n]) for n in self.labelnames)

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def get(self, **labels: str) -> float:
        key = self._key(labels)
        with self._lock:
            return self._values.get(key, 0.0)

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            values = dict(self._values)
        m = Metric(self.name, self.documentation, "unknown")
        for key, v in sorted(values.items()):
            m.add_sample(self.name, dict(zip(self.labelnames, key, strict=True)), v)
        yield m
