"""Configuration of the resource executor: force-update period, dry run, audit size (``koordlet run`` flags),
the network namespace of tc writes.

Layer: ``koordlet.resourceexecutor``. One frozen dataclass, built by ``koordlet.config.build`` like every
component's config.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ExecutorConfig:
    """Executor options (``koordlet run`` flags)."""

    force_update_seconds: float = 60.0
    """``--resource-force-update-seconds``: owned values are re-checked and re-applied this often."""
    dry_run: bool = False
    """Log what would be written; write nothing."""
    audit_size: int = 1000
    """Events kept in the in-memory audit log."""
    force_python: bool = False
    """Write with ``os.open``/``os.write`` even when the C helper is built."""
    unowned_ttl_seconds: float = 120.0
    """Cache entries without an owner are dropped after this long (koordlet's 2 min expiry)."""
    netns: str = ""
    """Network namespace of tc writes (network QoS); empty: the agent's own (tests shape inside theirs)."""
