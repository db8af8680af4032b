"""``NodeNUMAResourceArgs``: Koordinator's fields, defaults (``SetDefaults_NodeNUMAResourceArgs``) and
validation (``ValidateNodeNUMAResourceArgs``), read strictly from the profile's ``pluginConfig[].args``.

- ``defaultCPUBindPolicy`` (default ``FullPCPUs``): the policy of an LSE/LSR pod that names none (or
  ``Default``); ``FullPCPUs`` or ``SpreadByPCPUs``, or ``""`` to bind only pods that ask.
- ``scoringStrategy`` (default LeastAllocated over cpu and memory, weight 1 each): how nodes are scored.
- ``numaScoringStrategy`` (same default): how NUMA nodes are scored when hints are made, and the default
  NUMA allocate strategy (``MostAllocated`` here makes it ``MostAllocated``, else ``LeastAllocated``).
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koord.scheduler.plugins.noderesources.args import DEFAULT_RESOURCES, LEAST, MOST
from koord.scheduler.plugins.noderesources.args import _resources as resource_specs
from koordshared.apis.extension.numa import CPUBindPolicy, NUMAAllocateStrategy
from koordshared.apis.meta.strictargs import decode
from koordshared.runtime.errors import InvalidArgs

_FIELDS = {"defaultCPUBindPolicy": "str", "scoringStrategy": "object", "numaScoringStrategy": "object"}
_STRATEGY_FIELDS = {"type": "str", "resources": "object_list"}


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    type: str = LEAST
    resources: tuple[tuple[str, int], ...] = DEFAULT_RESOURCES


@dataclass(frozen=True, slots=True)
class NodeNUMAResourceArgs:
    default_cpu_bind_policy: str = CPUBindPolicy.FULL_PCPUS
    scoring_strategy: ScoringStrategy = ScoringStrategy()
    numa_scoring_strategy: ScoringStrategy = ScoringStrategy()

    @property
    def default_numa_allocate_strategy(self) -> str:
        """``GetDefaultNUMAAllocateStrategy``."""
        if self.numa_scoring_strategy.type == MOST:
            return NUMAAllocateStrategy.MOST_ALLOCATED
        return NUMAAllocateStrategy.LEAST_ALLOCATED


def _strategy(raw: Any, at: str) -> ScoringStrategy:
    if raw is None:
        return ScoringStrategy()
    v = decode(raw, _STRATEGY_FIELDS, f"{at}.")
    kind = v.get("type", "")
    if kind not in (LEAST, MOST):
        raise InvalidArgs(f"{at}.type: scoring strategy {kind!r} is not supported (want {LEAST} or {MOST})")
    raw_resources = raw.get("resources") if isinstance(raw, Mapping) else None
    return ScoringStrategy(kind, resource_specs(raw_resources, f"{at}.resources"))


def parse_args(raw: Mapping[str, Any] | None) -> NodeNUMAResourceArgs:
    """Decode, default and validate; :class:`InvalidArgs` names the first field in error."""
    v = decode(raw, _FIELDS)
    policy = v.get("defaultCPUBindPolicy", CPUBindPolicy.FULL_PCPUS)
    if policy not in ("", CPUBindPolicy.FULL_PCPUS, CPUBindPolicy.SPREAD_BY_PCPUS):
        raise InvalidArgs(
            f"defaultCPUBindPolicy: {policy!r}: must specified CPU bind policy FullPCPUs or SpreadByPCPUs"
        )
    return NodeNUMAResourceArgs(
        default_cpu_bind_policy=policy,
        scoring_strategy=_strategy(v.get("scoringStrategy"), "scoringStrategy"),
        numa_scoring_strategy=_strategy(v.get("numaScoringStrategy"), "numaScoringStrategy"),
    )
