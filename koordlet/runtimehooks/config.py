"""Configuration of the runtime hooks: which are on (their feature gates) and the reconciler's options
(``koordlet run`` flags). One frozen dataclass, built by ``koordlet.config.build``; the daemon fills in the
gates.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class HooksConfig:
    enabled: frozenset[str] = field(default_factory=frozenset)
    """Gates that are on (names of ``service.HOOKS``)."""
    reconcile_interval: float = 10.0
    """``--runtime-hooks-reconcile-interval``."""
    unset_cpu_quota: bool = True
    """Not ``--disable-unset-cpu-quota``."""
    be_cpu_manager: bool = False
    guard: bool = True
