"""Configuration of the metrics advisor: intervals and switches of every collector (koordlet's defaults).

Layer: ``koordlet.metricsadvisor``. One frozen dataclass, built by ``koordlet.config.build`` from the flags
(``--collect-res-used-interval`` is ``collect_interval``). An interval of 0 disables that collector.
"""

from __future__ import annotations

from dataclasses import dataclass

from koordshared.runtime.errors import ConfigError


@dataclass(frozen=True, slots=True)
class AdvisorConfig:
    """Intervals in seconds; 0 switches the collector off."""

    node_name: str = ""
    """The ``node`` label of every exported family."""
    collect_interval: float = 1.0
    """``--collect-res-used-interval``: node, pod/container, system and host-application usage."""
    be_interval: float = 1.0
    """BE resource collector (``node_be``)."""
    fast_sample_interval: float = 0.04
    """Fast node/BE CPU sampler for sub-second QoS reaction; 0 disables it."""
    fast_sample_own_cpu: bool = True
    """``--fast-sample-own-cpu``: the fast samples put the agent's own CPU back to its 1 s average."""
    psi_interval: float = 10.0
    """PSI collector (koordlet's PerformanceCollector period); 0 disables it."""
    cpi_enabled: bool = False
    """CPI collection (gate ``CPICollector``)."""
    cpi_interval: float = 60.0
    """``--cpi-collector-interval``: how often containers' cycles and instructions are counted."""
    cpi_window: float = 10.0
    """``--collect-cpi-timewindow``: how long each count runs."""
    resctrl_enabled: bool = False
    """resctrl monitoring (``--enable-resctrl-collector`` and gate ``ResctrlCollector``)."""
    resctrl_interval: float = 10.0
    """``--resctrl-collector-interval``."""
    page_cache: bool = False
    """``--enable-pagecache-collector``: node/pod/container memory usage with page cache."""
    host_app_interval: float = 1.0
    """Host applications of the NodeSLO; 0 disables them."""
    sys_metric_outdated_interval: float = 10.0
    """System usage is computed only from node, pod and host-app figures newer than this."""
    gc_interval: float = 60.0
    """How often series of pods and containers that are gone are dropped from the cache."""
    collect_containers: bool = True
    """Also sample every container dir (koordlet does), not only pod dirs."""
    force_python_reader: bool = False
    """Use the pure-Python batch reader even when the C one is built (tests, comparison)."""

    def __post_init__(self) -> None:
        if self.collect_interval <= 0:
            raise ConfigError(f"--collect-res-used-interval must be positive, got {self.collect_interval}")
        for name in ("be_interval", "fast_sample_interval", "psi_interval", "host_app_interval"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must not be negative, got {getattr(self, name)}")
        if not 0 < self.cpi_window < self.cpi_interval:
            raise ConfigError(
                f"--collect-cpi-timewindow ({self.cpi_window}s) must be positive and below "
                f"--cpi-collector-interval ({self.cpi_interval}s)"
            )
        if self.resctrl_interval <= 0:
            raise ConfigError(f"--resctrl-collector-interval must be positive, got {self.resctrl_interval}")
        if self.sys_metric_outdated_interval <= 0 or self.gc_interval <= 0:
            raise ConfigError("sys_metric_outdated_interval and gc_interval must be positive")
