"""``BatchResource``: a best-effort pod's batch resources become its cgroup limits (Koordinator's
``hooks/batchresource``). Details: ``docs/modules.md``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from koordlet import api
from koordlet.runtimehooks.protocol import NOTHING, ContainerRequest, PodRequest, Resources, Rule
from koordshared.apis.extension.qos import BATCH_CPU, BATCH_MEMORY
from koordshared.apis.meta.quantity import to_int
from koordshared.runtime.errors import InvalidValue
from koordshared.runtime.logs import OncePerChange

log = logging.getLogger(__name__)
_refusals = OncePerChange(log)

EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"
CFS_BASE_PERIOD = 100000
CFS_QUOTA_MIN = 1000
SHARES_MIN, SHARES_MAX = 2, 262144
POLICY_CFS_QUOTA = "cfsQuota"


def milli_cpu_to_shares(milli: int) -> int:
    """Koordinator's ``MilliCPUToShares``."""
    if milli <= 0:
        return SHARES_MIN
    return min(max(milli * 1024 // 1000, SHARES_MIN), SHARES_MAX)


def milli_cpu_to_quota(milli: int) -> int:
    """Koordinator's ``MilliCPUToQuota``: -1 (unlimited) for no limit, never under 1000 us."""
    quota = milli * CFS_BASE_PERIOD // 1000
    if quota <= 0:
        return -1
    return max(quota, CFS_QUOTA_MIN)


@dataclass(frozen=True, slots=True)
class BatchSpec:
    """One container's batch resources (0 = not asked)."""

    cpu_request: int = 0
    cpu_limit: int = 0
    memory_limit: int = 0


def _from_container(c: api.ContainerInfo) -> BatchSpec | None:
    values = (
        c.batch_cpu_request_milli,
        c.batch_cpu_limit_milli,
        c.batch_memory_request_bytes,
        c.batch_memory_limit_bytes,
    )
    if not any(values):
        return None
    return BatchSpec(c.batch_cpu_request_milli, c.batch_cpu_limit_milli, c.batch_memory_limit_bytes)


def _quantity(values: object, name: str) -> int:
    if not isinstance(values, Mapping) or name not in values:
        return 0
    try:
        return to_int(values[name])
    except (InvalidValue, TypeError):
        return 0


def _from_annotation(pod: api.PodInfo) -> dict[str, BatchSpec]:
    text = pod.annotations.get(EXTENDED_RESOURCE_SPEC)
    if not text:
        return {}
    try:
        doc = json.loads(text)
    except ValueError:
        _refusals.warning(
            f"{pod.uid} spec", f"pod {pod.namespace}/{pod.name}: {EXTENDED_RESOURCE_SPEC} is not JSON"
        )
        return {}
    containers = doc.get("containers") if isinstance(doc, Mapping) else None
    out = {}
    for name, spec in containers.items() if isinstance(containers, Mapping) else ():
        req, lim = (spec.get(k) if isinstance(spec, Mapping) else None for k in ("requests", "limits"))
        out[str(name)] = BatchSpec(
            _quantity(req, BATCH_CPU), _quantity(lim, BATCH_CPU), _quantity(lim, BATCH_MEMORY)
        )
    return out


def batch_specs(pod: api.PodInfo) -> dict[str, BatchSpec]:
    """Container name -> batch resources, from the spec (Koordinator's ``GetPodExtendedResources``), else
    from the annotation; only containers that ask for some are listed."""
    from_spec = {c.name: s for c in pod.containers if (s := _from_container(c)) is not None}
    return from_spec or _from_annotation(pod)


def cfs_quota_enabled(slo: api.NodeSLO) -> bool:
    """False under BE suppression with the ``cfsQuota`` policy (``parseRuleForNodeSLO``)."""
    t = slo.resource_used_threshold_with_be
    return not (t.enable and t.cpu_suppress_policy == POLICY_CFS_QUOTA)


def _sum_or_unlimited(values: Sequence[int]) -> int:
    return -1 if any(v <= 0 for v in values) else sum(values)


class BatchResource:
    name = "BatchResource"

    def pod(self, req: PodRequest, rule: Rule) -> Resources:
        if req.qos is not api.QOSClass.BE:
            return NOTHING
        specs = list(batch_specs(req.pod).values())
        if not specs:
            return NOTHING  # no batch resources: the kubelet's values stay
        quota = -1
        if cfs_quota_enabled(rule.slo):
            quota = milli_cpu_to_quota(_sum_or_unlimited([s.cpu_limit for s in specs]))
        return Resources(
            cpu_shares=milli_cpu_to_shares(sum(max(s.cpu_request, 0) for s in specs)),
            cfs_quota=quota,
            memory_limit=_sum_or_unlimited([s.memory_limit for s in specs]),
        )

    def container(self, req: ContainerRequest, rule: Rule) -> Resources:
        if req.qos is not api.QOSClass.BE or req.sandbox:
            return NOTHING
        spec = batch_specs(req.pod).get(req.container.name)
        if spec is None:
            return NOTHING
        quota = milli_cpu_to_quota(spec.cpu_limit) if cfs_quota_enabled(rule.slo) else -1
        return Resources(
            cpu_shares=milli_cpu_to_shares(spec.cpu_request),
            cfs_quota=quota,
            memory_limit=spec.memory_limit if spec.memory_limit > 0 else -1,
        )
