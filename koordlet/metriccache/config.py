"""Metric cache configuration: persistence path and bound, checkpoint period, retention per metric family.

Retention is per family, not per kind. Node-level series (``node_*``, ``sys_*``, ``node_be``,
``host_application_*``) keep 30 minutes because the NodeMetric report aggregates them over 5, 10 and 30
minute windows. Pod and container series keep 10 minutes by default: the report only averages them over
``aggregateDurationSeconds`` (300 s by default) and the eviction strategies look back seconds, so 10 minutes
covers a raised aggregate duration with slack while bounding the high-cardinality families. Everything else
(``resctrl_*``, device metrics) is low-cardinality node-level data and shares the node retention.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from pathlib import Path

from koordshared.runtime.errors import ConfigError

MIB = 1024 * 1024
MAX_CHECKPOINT_INTERVAL = 60.0


class Family(enum.Enum):
    """Retention and trimming class of a metric kind."""

    NODE = "node"
    POD = "pod"
    OTHER = "other"


_NODE_PREFIXES = ("node_", "sys_", "host_application_")
_POD_PREFIXES = ("pod_", "container_")


def family_of(metric: str) -> Family:
    """The family of a metric kind, from its name prefix (``node_be`` is a node metric)."""
    if metric.startswith(_POD_PREFIXES):
        return Family.POD
    if metric.startswith(_NODE_PREFIXES):
        return Family.NODE
    return Family.OTHER


@dataclass(frozen=True, slots=True)
class MetricCacheConfig:
    """How much history the cache keeps and where it is persisted."""

    tsdb_path: Path | None = None
    """``--tsdb-path``: directory of the checkpoint file; ``None`` keeps everything in memory only."""
    tsdb_max_bytes: int = 100 * MIB
    """``--tsdb-max-bytes``: the checkpoint is trimmed (pod/container samples first) to stay under this."""
    checkpoint_interval: float = 30.0
    """Seconds between checkpoints of the running cache; at most 60 so a crash loses at most a minute."""
    first_checkpoint_delay: float = 2.0
    """Seconds from start to the first checkpoint; the delay then doubles up to ``checkpoint_interval``,
    so a young agent killed before its first full interval keeps most of what it collected."""
    node_retention: float = 1800.0
    """Seconds of history for node-level families (the report's longest window is 30 minutes)."""
    pod_retention: float = 600.0
    """Seconds of history for ``pod_*`` and ``container_*`` series."""
    other_retention: float = 1800.0
    """Seconds of history for any other kind (resctrl, devices)."""
    collect_interval: float = 1.0
    """``--collect-res-used-interval``: sizes each ring (retention / interval, plus slack)."""
    capacity_slack: float = 0.05
    """Extra ring room as a fraction, so late ticks do not push the oldest in-retention sample out."""

    def __post_init__(self) -> None:
        if not 0 < self.checkpoint_interval <= MAX_CHECKPOINT_INTERVAL:
            raise ConfigError(
                f"checkpoint interval must be in (0, {MAX_CHECKPOINT_INTERVAL:g}] s, "
                f"got {self.checkpoint_interval}"
            )
        if self.first_checkpoint_delay <= 0:
            raise ConfigError(f"first checkpoint delay must be positive, got {self.first_checkpoint_delay}")
        if self.tsdb_max_bytes <= 0:
            raise ConfigError(f"--tsdb-max-bytes must be positive, got {self.tsdb_max_bytes}")
        if self.collect_interval <= 0:
            raise ConfigError(f"collect interval must be positive, got {self.collect_interval}")
        if self.capacity_slack < 0:
            raise ConfigError(f"capacity slack must not be negative, got {self.capacity_slack}")
        for name in ("node_retention", "pod_retention", "other_retention"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.pod_retention < 300:
            raise ConfigError(
                f"pod_retention must cover the 5-minute report window, got {self.pod_retention}"
            )

    def retention(self, family: Family) -> float:
        if family is Family.NODE:
            return self.node_retention
        if family is Family.POD:
            return self.pod_retention
        return self.other_retention

    def retention_for(self, metric: str) -> float:
        return self.retention(family_of(metric))

    def capacity_for(self, metric: str) -> int:
        """Ring capacity for one series of ``metric``: retention / interval plus slack (at least 8)."""
        samples = self.retention_for(metric) / self.collect_interval
        return max(8, math.ceil(samples * (1.0 + self.capacity_slack)) + 2)
