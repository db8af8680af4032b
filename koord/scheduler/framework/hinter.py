"""The scheduling hint of the pod being scheduled, as the SchedulingHint plugin leaves it in the cycle state
for the others (Koordinator's ``frameworkext/hinter``): the nodes PreFilter narrows the search to, the
nodes to try first, and per-plugin extensions (DeviceShare keeps a pod's recorded device allocation when it
finds its own name there)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord.scheduler.framework.interface import CycleState

STATE_KEY = "SchedulingHintState"


@dataclass(frozen=True, slots=True)
class SchedulingHintState:
    pre_filter_nodes: tuple[str, ...] = ()
    preferred_nodes: tuple[str, ...] = ()
    extensions: Mapping[str, Any] = field(default_factory=dict)


def hint_state(state: CycleState) -> SchedulingHintState | None:
    """The hint written this cycle, if any."""
    found = state.get(STATE_KEY)
    return found if isinstance(found, SchedulingHintState) else None


def set_hint_state(state: CycleState, hint: SchedulingHintState) -> None:
    state.write(STATE_KEY, hint)
