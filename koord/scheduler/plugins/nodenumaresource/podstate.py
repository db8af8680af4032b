"""What NodeNUMAResource decides about a pod once per cycle, in PreFilter (Koordinator's ``plugin.go``
``PreFilter`` and ``util.go``), and the rules that then combine it with each node.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from koord.scheduler.framework import Obj, PodInfo, Status
from koord.scheduler.plugins.nodenumaresource.allocation import PodAllocation
from koord.scheduler.plugins.nodenumaresource.restorestate import PreemptibleAlloc
from koordshared.apis.core.pod import kube_qos_of, str_map
from koordshared.apis.extension.numa import (
    CPUBindPolicy,
    NodeCPUBindPolicy,
    NUMATopologyPolicy,
    numa_topology_spec,
    resource_spec,
)
from koordshared.apis.extension.qos import PriorityClass, QOSClass, priority_class_of, qos_of, qos_raw
from koordshared.runtime.errors import InvalidValue

ERR_NOT_MATCH_NUMA_TOPOLOGY = "node(s) NUMA Topology policy not match"
ERR_INVALID_REQUESTED_CPUS = "the requested CPUs must be integer"
ERR_INVALID_CPU_TOPOLOGY = "node(s) invalid CPU Topology"
ERR_CPU_TOPOLOGY_NOT_FOUND = "node(s) CPU Topology not found (no NodeResourceTopology reported)"
ERR_SMT_ALIGNMENT = "node(s) requested cpus not multiple cpus per core"
ERR_CPU_BIND_POLICY_CONFLICT = "node(s) cpu bind policy conflicts with pod's required cpu bind policy"
ERR_MISSING_NUMA = "node(s) missing NUMA resources"
ERR_INSUFFICIENT_NUMA_NODE = "node(s) Insufficient NUMA Node resources"
ANNOTATION_RESERVATION_AFFINITY = "scheduling.koordinator.sh/reservation-affinity"
EXCLUSIVE_REQUIRED = "Required"


def allow_use_cpuset(pod: Obj) -> bool:
    """Koordinator's ``AllowUseCPUSet``."""
    labels = str_map((pod.get("metadata") or {}).get("labels") or {})
    if qos_raw(labels) not in (QOSClass.LSE, QOSClass.LSR):
        return False
    spec = pod.get("spec") or {}
    prio = spec.get("priority")
    priority = prio if isinstance(prio, int) and not isinstance(prio, bool) else None
    return priority_class_of(labels, priority, qos_of(labels, kube_qos_of(pod))) is PriorityClass.PROD


@dataclass(slots=True)
class PreFilterState:
    skip: bool = False
    request_cpu_bind: bool = False
    requests: dict[str, int] = field(default_factory=dict)
    required_cpu_bind_policy: str = ""
    preferred_cpu_bind_policy: str = ""
    preferred_cpu_exclusive_policy: str = ""
    pod_numa_policy: NUMATopologyPolicy = NUMATopologyPolicy.NONE
    pod_numa_exclusive: str = ""
    num_cpus_needed: int = 0
    has_reservation_affinity: bool = False
    allocation: PodAllocation | None = None
    """The placement Reserve made (PreBind writes it)."""
    preemption: dict[str, PreemptibleAlloc] = field(default_factory=dict)
    """Per node, what preemption's what-ifs freed."""
    shape: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)
    """:meth:`memo_key`, once computed (it is asked for on every node a NUMA decision is made on)."""

    def clone(self) -> PreFilterState:
        return replace(self, preemption={n: a.clone() for n, a in self.preemption.items()})

    def memo_key(self) -> tuple[Any, ...]:
        """What of the pod its NUMA decisions on a node depend on (pods of one shape share them)."""
        if self.shape is None:
            self.shape = self._shape()
        return self.shape

    def _shape(self) -> tuple[Any, ...]:
        return (
            self.request_cpu_bind,
            tuple(sorted(self.requests.items())),
            self.required_cpu_bind_policy,
            self.preferred_cpu_bind_policy,
            self.preferred_cpu_exclusive_policy,
            self.pod_numa_policy,
            self.pod_numa_exclusive,
            self.num_cpus_needed,
            self.has_reservation_affinity,
        )

    def exclusive_for(self) -> str:
        """``singleNUMANodeExclusive``: the pod's, ``Required`` by default when the pod names a policy
        (a node's policy alone keeps Koordinator's earlier behaviour: none)."""
        if self.pod_numa_exclusive:
            return self.pod_numa_exclusive
        return EXCLUSIVE_REQUIRED if self.pod_numa_policy is not NUMATopologyPolicy.NONE else ""


def pre_filter_state(pod: Obj, info: PodInfo, default_policy: str) -> tuple[PreFilterState, Status | None]:
    """The pod's state, or why it cannot be scheduled anywhere."""
    annotations = str_map((pod.get("metadata") or {}).get("annotations") or {})
    try:
        spec = resource_spec(annotations)
        numa_spec = numa_topology_spec(annotations)
    except InvalidValue as err:
        return PreFilterState(skip=True), Status.unresolvable(str(err))
    requests = dict(info.requests)
    if not any(requests.values()):
        return PreFilterState(skip=True), None
    affinity = annotations.get(ANNOTATION_RESERVATION_AFFINITY)
    if affinity is not None:
        try:
            json.loads(affinity)
        except ValueError as err:
            return PreFilterState(skip=True), Status.unresolvable(f"{ANNOTATION_RESERVATION_AFFINITY}: {err}")
    try:
        pod_policy = NUMATopologyPolicy(numa_spec.numa_topology_policy)
    except ValueError:
        return PreFilterState(skip=True), Status.unresolvable(
            f"numaTopologyPolicy {numa_spec.numa_topology_policy!r}: "
            "want BestEffort, Restricted or SingleNUMANode"
        )
    cpu = requests.get("cpu", 0)
    state = PreFilterState(
        requests=requests,
        num_cpus_needed=cpu // 1000,
        pod_numa_policy=pod_policy,
        pod_numa_exclusive=numa_spec.single_numa_node_exclusive,
        has_reservation_affinity=affinity is not None,
    )
    if allow_use_cpuset(pod):
        policy = spec.preferred_cpu_bind_policy
        if policy in ("", CPUBindPolicy.DEFAULT):
            policy = default_policy
        required = spec.required_cpu_bind_policy
        if required == CPUBindPolicy.DEFAULT:
            required = default_policy
        if required:
            policy = required
        if policy in (CPUBindPolicy.FULL_PCPUS, CPUBindPolicy.SPREAD_BY_PCPUS):
            if cpu % 1000:
                return state, Status.unresolvable(ERR_INVALID_REQUESTED_CPUS)
            if cpu > 0:
                state.request_cpu_bind = True
                state.required_cpu_bind_policy = required
                state.preferred_cpu_bind_policy = policy
                state.preferred_cpu_exclusive_policy = spec.preferred_cpu_exclusive_policy
    return state, None


def request_cpu_bind(state: PreFilterState, node_policy: str) -> tuple[bool, Status | None]:
    """Whether the pod binds CPUs on a node with ``node_policy`` (``requestCPUBind``)."""
    if state.request_cpu_bind:
        return True, None
    cpu = state.requests.get("cpu", 0)
    if cpu == 0:
        return False, None
    if node_policy and node_policy != NodeCPUBindPolicy.NONE:
        if cpu % 1000:
            return False, Status.unresolvable(ERR_INVALID_REQUESTED_CPUS)
        return True, None
    return False, None


def cpu_bind_policy(state: PreFilterState, node_policy: str) -> tuple[str, bool]:
    """``(policy, required)`` on a node (``getCPUBindPolicy``): the pod's required one, else the node's
    forced one, else the pod's preferred one (not required)."""
    if state.required_cpu_bind_policy:
        return state.required_cpu_bind_policy, True
    if node_policy == NodeCPUBindPolicy.SPREAD_BY_PCPUS:
        return CPUBindPolicy.SPREAD_BY_PCPUS, True
    if node_policy == NodeCPUBindPolicy.FULL_PCPUS_ONLY:
        return CPUBindPolicy.FULL_PCPUS, True
    return state.preferred_cpu_bind_policy, False


def merge_numa_policy(
    node: NUMATopologyPolicy, pod: NUMATopologyPolicy
) -> tuple[NUMATopologyPolicy, Status | None]:
    """``mergeTopologyPolicy``: the pod's policy when it has one; a node with another one does not fit."""
    if node is not NUMATopologyPolicy.NONE and pod is not NUMATopologyPolicy.NONE and pod is not node:
        return node, Status.unresolvable(ERR_NOT_MATCH_NUMA_TOPOLOGY)
    return (pod if pod is not NUMATopologyPolicy.NONE else node), None
