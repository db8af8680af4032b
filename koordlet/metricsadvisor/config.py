"""Configuration of the metrics advisor: intervals and switches of every collector (koordlet's defaults).

Layer: ``koordlet.metricsadvisor``. One frozen dataclass; ``koordlet run`` fills it from its flags
(``--collect-res-used-interval`` is ``collect_interval``). An interval of 0 disables that collector.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from koordlet.errors import ConfigError


class AgentConfiguration(Protocol):
    """The fields of ``koordlet.config.Configuration`` read here (that layer sits above this one)."""

    @property
    def node_name(self) -> str: ...

    @property
    def collect_interval(self) -> float: ...

    @property
    def fast_sample_interval(self) -> float: ...

    @property
    def psi_interval(self) -> float: ...

    @property
    def options(self) -> Mapping[str, object]: ...


@dataclass(frozen=True, slots=True)
class AdvisorConfig:
    """Intervals in seconds; 0 switches the collector off."""

    node_name: str = ""
    """The ``node`` label of every exported family."""
    collect_interval: float = 1.0
    """``--collect-res-used-interval``: node, pod/container, system and host-application usage."""
    be_interval: float = 1.0
    """BE resource collector (``node_be``)."""
    fast_sample_interval: float = 0.1
    """Fast node/BE CPU sampler for sub-second QoS reaction; 0 disables it."""
    psi_interval: float = 10.0
    """PSI collector (koordlet's PerformanceCollector period); 0 disables it."""
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
        if self.sys_metric_outdated_interval <= 0 or self.gc_interval <= 0:
            raise ConfigError("sys_metric_outdated_interval and gc_interval must be positive")

    @classmethod
    def from_configuration(cls, cfg: AgentConfiguration) -> AdvisorConfig:
        """From the agent's parsed flags (``--collect-res-used-interval``, ``--fast-sample-interval``,
        ``--psi-collector-interval``, ``--collect-sys-metric-outdated-interval``)."""
        outdated = cfg.options.get("collect-sys-metric-outdated-interval", 10.0)
        try:
            outdated_s = float(outdated)  # type: ignore[arg-type]
        except (TypeError, ValueError) as err:
            raise ConfigError(f"--collect-sys-metric-outdated-interval {outdated!r}: not seconds") from err
        return cls(
            node_name=cfg.node_name,
            collect_interval=cfg.collect_interval,
            be_interval=cfg.collect_interval,
            fast_sample_interval=cfg.fast_sample_interval,
            psi_interval=cfg.psi_interval,
            host_app_interval=cfg.collect_interval,
            sys_metric_outdated_interval=outdated_s,
        )
