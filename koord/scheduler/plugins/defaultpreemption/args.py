"""``DefaultPreemptionArgs`` with kube-scheduler's defaults and validation
(``apis/config/v1/defaults.go``, ``validation/validation_pluginargs.go``): how many candidate nodes a
preemption dry-runs before it picks one, at least ``minCandidateNodesPercentage`` (0..100, default 10) of
the nodes preemption could help and at least ``minCandidateNodesAbsolute`` (>= 0, default 100), never
both 0."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordshared.apis.meta.strictargs import InvalidArgs, decode

_FIELDS = {"minCandidateNodesPercentage": "int", "minCandidateNodesAbsolute": "int"}


@dataclass(frozen=True, slots=True)
class PreemptionArgs:
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100

    def num_candidates(self, nodes: int) -> int:
        """kube-scheduler's ``calculateNumCandidates``: the percentage of ``nodes``, at least the absolute
        number, at most ``nodes``."""
        n = nodes * self.min_candidate_nodes_percentage // 100
        return min(max(n, self.min_candidate_nodes_absolute), nodes)


def parse_args(raw: Mapping[str, Any] | None) -> PreemptionArgs:
    v = decode(raw, _FIELDS)
    pct = v.get("minCandidateNodesPercentage", 10)
    absolute = v.get("minCandidateNodesAbsolute", 100)
    errors = []
    if not 0 <= pct <= 100:
        errors.append(f"minCandidateNodesPercentage: Invalid value: {pct}: not in valid range [0, 100]")
    if absolute < 0:
        errors.append(f"minCandidateNodesAbsolute: Invalid value: {absolute}: not in valid range [0, inf)")
    if pct == 0 and absolute == 0:
        errors.append(
            "minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as "
            "minCandidateNodesAbsolute"
        )
        errors.append(
            "minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as "
            "minCandidateNodesPercentage"
        )
    if errors:
        raise InvalidArgs("; ".join(errors))
    return PreemptionArgs(pct, absolute)
