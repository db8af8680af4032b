"""System usage: what the node uses outside pods and host applications (SystemResourceCollector).

Layer: ``koordlet.metricsadvisor``. ``sys = max(node - sum(pods) - sum(host apps), 0)`` for CPU (cores) and
memory (bytes), from the figures the other collectors left in the shared state, and only when every one
of them is newer than ``now - outdated``: a stale input would turn a pod's usage into "system" usage.
Host applications count as zero when none are configured (their collector then publishes nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from koordlet import api
from koordlet.metricsadvisor import framework as fw

NAME = "SystemResourceCollector"
ERR_STALE = "stale_inputs"


@dataclass(frozen=True, slots=True)
class SystemResourceConfig:
    interval: float = 1.0
    outdated: float = 10.0
    """``sys_metric_outdated_interval``: maximum age of every input, seconds."""


class SystemResourceCollector:
    """``collect()`` appends ``sys_cpu_usage`` and ``sys_memory_usage``."""

    name = NAME

    def __init__(
        self, config: SystemResourceConfig, opts: fw.Options, *, host_apps_enabled: bool = True
    ) -> None:
        cache = opts.cache
        shared = opts.shared
        clock = opts.clock
        errors = opts.errors
        self.config = config
        self.interval = config.interval
        self._cache = cache
        self._shared = shared
        self._clock = clock
        self._errors = errors
        self._host_apps_enabled = host_apps_enabled
        self._synced = False

    def _fresh(self, key: str, now: float, *, optional: bool = False) -> float | None:
        got = self._shared.get(key)
        if got is None:
            return 0.0 if optional else None
        if now - got.t > self.config.outdated:
            return None
        return got.value

    def collect(self) -> None:
        now = self._clock()
        stale = False
        for metric, node_key, pods_key, apps_key in (
            (api.SYS_CPU_USAGE, fw.NODE_CPU, fw.PODS_CPU, fw.HOST_APPS_CPU),
            (api.SYS_MEMORY_USAGE, fw.NODE_MEMORY, fw.PODS_MEMORY, fw.HOST_APPS_MEMORY),
        ):
            node = self._fresh(node_key, now)
            pods = self._fresh(pods_key, now)
            # A host-app figure is required only once that collector has published one.
            apps = self._fresh(apps_key, now, optional=True) if self._host_apps_enabled else 0.0
            if node is None or pods is None or apps is None:
                stale = True
                continue
            self._cache.append(metric, None, api.system_usage(node, pods, apps), now)
            self._synced = True
        if stale:
            self._errors.error(NAME, ERR_STALE)

    def has_synced(self) -> bool:
        return self._synced

    def close(self) -> None:
        return None
