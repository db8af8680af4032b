"""CPU pools and the BE cpuset pick of the ``BECPUSuppress`` cpuset policy (Koordinator's
``pkg/koordlet/qosmanager/plugins/cpusuppress/cpu_suppress.go``).

Pools: the usable CPUs are the online ones minus the node's reserved CPUs (``NodeInfo.reserved_cpus``,
from the ``node.koordinator.sh/reservation`` annotation), minus the system QoS CPUs when they are
exclusive (``node.koordinator.sh/system-qos-resource``, exclusive unless it says otherwise) and minus CPUs
bound to pods labelled LSE; CPUs bound to pods labelled LSR form the ``lsr`` pool and the rest the ``ls``
pool (binding from ``scheduling.koordinator.sh/resource-status``). Details: ``docs/modules.md``.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from koordlet import api
from qosplugins import _shared

RESOURCE_STATUS_ANNOTATION = "scheduling.koordinator.sh/resource-status"
SYSTEM_QOS_ANNOTATION = "node.koordinator.sh/system-qos-resource"


@dataclass(frozen=True, slots=True)
class CPUPools:
    """Where BE may run: ``usable`` = ``lsr`` | ``ls`` (all online, not reserved, not LSE-bound)."""

    online: tuple[api.CPUInfo, ...]
    usable: tuple[api.CPUInfo, ...]
    lsr: tuple[api.CPUInfo, ...]
    ls: tuple[api.CPUInfo, ...]

    @property
    def usable_ids(self) -> frozenset[int]:
        return frozenset(c.cpu for c in self.usable)


def _json_object(text: str | None) -> dict[str, object]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _cpus(text: object) -> frozenset[int]:
    """A cpu list from an annotation; anything else (absent, not a string, malformed) is no CPUs."""
    if not isinstance(text, str):
        return frozenset()
    try:
        return api.parse_cpuset(text)
    except api.InvalidValue:
        return frozenset()


def pod_bound_cpus(pod: api.PodInfo) -> frozenset[int]:
    """CPUs the scheduler bound the pod to (``resource-status`` ``cpuset``), empty when shared."""
    status = _json_object(pod.annotations.get(RESOURCE_STATUS_ANNOTATION))
    return _cpus(status.get("cpuset"))


def pod_has_resource_status(pod: api.PodInfo) -> bool:
    """The scheduler placed the pod (a ``cpuset`` or NUMA resources in ``resource-status``): under
    ``BECPUManager`` its containers' cpusets are the runtime hook's, not the suppress strategy's."""
    status = _json_object(pod.annotations.get(RESOURCE_STATUS_ANNOTATION))
    return bool(status.get("cpuset")) or bool(status.get("numaNodeResources"))


def system_qos_exclusive_cpus(node: api.NodeInfo | None) -> frozenset[int]:
    """CPUs kept for system QoS pods when exclusive (``cpusetExclusive`` absent means exclusive)."""
    if node is None:
        return frozenset()
    res = _json_object(node.annotations.get(SYSTEM_QOS_ANNOTATION))
    if res.get("cpusetExclusive", True) is False:
        return frozenset()
    return _cpus(res.get("cpuset"))


def reserved_milli(node: api.NodeInfo | None) -> int:
    """Koordlet's node reservation: the largest of kubelet's (capacity - allocatable), the reservation
    annotation's CPU and its pinned CPUs."""
    if node is None:
        return 0
    return max(node.cpu_reserved_milli, node.reservation_cpu_milli, 1000 * len(node.reserved_cpus))


def cpu_pools(
    topology: Sequence[api.CPUInfo], node: api.NodeInfo | None, pods: Sequence[api.PodInfo]
) -> CPUPools:
    online = tuple(sorted(topology, key=lambda c: c.cpu))
    lse: set[int] = set()
    lsr: set[int] = set()
    for pod in pods:
        if not pod.is_active:
            continue
        if pod.qos_raw is api.QOSClass.LSE:
            lse |= pod_bound_cpus(pod)
        elif pod.qos_raw is api.QOSClass.LSR:
            lsr |= pod_bound_cpus(pod)
    reserved = node.reserved_cpus if node is not None else frozenset()
    excluded = reserved | system_qos_exclusive_cpus(node) | lse
    usable = tuple(c for c in online if c.cpu not in excluded)
    floor = _shared.bound_cpuset_cores(len(online))
    if len(usable) < floor:
        # Reservations leave fewer CPUs than BE's minimum: BE still needs somewhere to run, so fall back
        # to every online CPU rather than write an (invalid) empty or single-CPU set.
        usable = online
    return CPUPools(
        online=online,
        usable=usable,
        lsr=tuple(c for c in usable if c.cpu in lsr),
        ls=tuple(c for c in usable if c.cpu not in lsr),
    )


def pick_spread(cpus: Sequence[api.CPUInfo], need: int) -> list[int]:
    """``need`` CPUs, sibling pairs first, spread over (NUMA node, socket) buckets (module doc);
    ``[]`` when ``need`` exceeds the CPUs offered."""
    if need <= 0 or need > len(cpus):
        return []
    buckets: dict[tuple[int, int], list[api.CPUInfo]] = {}
    for c in cpus:
        buckets.setdefault((c.node, c.socket), []).append(c)
    queues = [sorted(b, key=lambda c: (c.core, c.cpu)) for b in buckets.values()]
    queues.sort(key=lambda q: (-len(q), q[0].cpu))
    picked: list[int] = []
    used: set[int] = set()

    def pair(q: list[api.CPUInfo]) -> tuple[int, int] | None:
        for a, b in itertools.pairwise(q):
            if a.cpu not in used and b.cpu not in used and a.core == b.core:
                return a.cpu, b.cpu
        return None

    def single(q: list[api.CPUInfo]) -> tuple[int] | None:
        return next(((c.cpu,) for c in q if c.cpu not in used), None)

    i = 0
    for taker, least in ((pair, 2), (single, 1)):
        start, before = i, -1
        while need - len(picked) >= least:
            if i == start:
                if before == len(picked):
                    break  # a whole turn over the buckets found nothing more of this kind
                before = len(picked)
            got = taker(queues[i])
            if got is not None:
                picked.extend(got)
                used.update(got)
            i = (i + 1) % len(queues)
    return sorted(picked) if len(picked) == need else []


def choose_be_cpus(pools: CPUPools, suppress_milli: float, old_count: int | None) -> list[int]:
    """The BE cpuset for a budget of ``suppress_milli``: at least 2 CPUs, growth ≤ 10 % of CPUs a step.

    The share taken from the LSR pool is proportional to its size, so BE does not pile onto one pool.
    Where Koordinator writes nothing (a budget above the usable CPUs, a pool too small for its share) we
    give BE every usable CPU, or pick over both pools together: BE is never left where it was by accident.
    """
    total = len(pools.usable)
    floor = _shared.bound_cpuset_cores(len(pools.online))
    want = max(math.ceil(max(suppress_milli, 0.0) / 1000.0), floor)
    if old_count is not None and old_count > 0:
        # Slow scale-up (koordlet's beMaxIncreaseCPUPercent): shrink at once, grow by 10 % of CPUs per tick.
        want = min(want, old_count + math.ceil(len(pools.online) * 0.1))
    want = max(min(want, total), floor)
    if want >= total:
        return sorted(c.cpu for c in pools.usable)
    lsr_n = want * len(pools.lsr) // total if total else 0
    ls_n = want - lsr_n
    if ls_n > len(pools.ls):
        ls_n = len(pools.ls)
        lsr_n = want - ls_n
    picked = pick_spread(pools.lsr, lsr_n) + pick_spread(pools.ls, ls_n)
    if len(picked) != want:
        picked = pick_spread(pools.usable, want)
    return sorted(picked)
