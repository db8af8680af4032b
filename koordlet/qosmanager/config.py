"""Configuration of the QoS manager and its evictor (``koordlet run`` flags).

Layer: ``koordlet.qosmanager``. One frozen dataclass, built by ``koordlet.config.build`` like every
component's config; :attr:`QOSManagerConfig.agent` is what every plugin context carries as ``ctx.agent``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from koordlet import api


@dataclass(frozen=True, slots=True)
class QOSManagerConfig:
    """What the plugin host and the evictor are told."""

    agent: api.AgentOptions = field(default_factory=api.AgentOptions)
    """The agent's options every plugin may follow (``ctx.agent``)."""
    only_evict_by_api: bool = False
    """``--only-evict-by-api``: evict through the Eviction API instead of killing processes."""
    dry_run: bool = False
    """``--dry-run``: plugins decide and log; the evictor does not act."""
