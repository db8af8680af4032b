"""The runtime-hook contract: what a hook is asked about (a pod or a container, at a stage) and what it
answers (:class:`Resources`), independent of how the request arrives.

Koordinator's ``runtimehooks/protocol``: a hook is a pure function of the request and the node's
:class:`Rule`; the transport turns requests into writes. Here the one transport is the reconciler
(``reconciler.py``), which builds requests from the pods the states informer lists and writes the answers
through the resource executor. An NRI transport (containerd >= 1.7) would build the same requests from
NRI's ``RunPodSandbox``/``CreateContainer``/``UpdateContainer`` events, turn a container's
:class:`Resources` into a ``ContainerAdjustment`` (cpuset, quota, shares, memory limit) and write the
pod-level answer through the executor, since NRI cannot adjust the sandbox's cgroup; the hooks would not
change (``docs/runtimehooks.md``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Protocol

from koordlet import api
from koordshared.apis.extension import numa
from koordshared.apis.topology import noderesourcetopology as nrt
from koordshared.runtime.errors import InvalidValue


class Stage(enum.StrEnum):
    """Koordinator's hook stages (``pkg/runtimeproxy/config``) the hooks here answer."""

    PRE_RUN_POD_SANDBOX = "PreRunPodSandbox"
    PRE_CREATE_CONTAINER = "PreCreateContainer"
    PRE_UPDATE_CONTAINER_RESOURCES = "PreUpdateContainerResources"


@dataclass(frozen=True, slots=True)
class PodRequest:
    pod: api.PodInfo
    qos: api.QOSClass
    """The class hooks decide on (Koordinator's ``PodQOSFilter``): the ``koordinator.sh/qosClass`` label,
    or LSR for an unlabelled pod the scheduler bound to CPUs."""


@dataclass(frozen=True, slots=True)
class ContainerRequest:
    pod: api.PodInfo
    qos: api.QOSClass
    container: api.ContainerInfo
    sandbox: bool = False
    """The pod's sandbox (pause) container, which has no spec: only cpusets apply to it."""


@dataclass(frozen=True, slots=True)
class Resources:
    """A hook's answer; ``None`` leaves a value as it is. Values have cgroup v1 meaning (quota -1 and
    memory -1 are "no limit"); the executor maps them to v2 files."""

    cpuset: str | None = None
    cfs_quota: int | None = None
    cpu_shares: int | None = None
    memory_limit: int | None = None
    bvt_warp_ns: int | None = None
    oom_score_adj: int | None = None
    """Written to every process of the container (not a cgroup file)."""
    core_sched_group: str | None = None
    """The core-scheduling group the container's processes join (one cookie per group)."""

    def merged(self, later: Resources) -> Resources:
        """This answer with every value ``later`` sets taking its place (hooks run in a fixed order)."""
        changes = {
            f.name: getattr(later, f.name) for f in fields(later) if getattr(later, f.name) is not None
        }
        return replace(self, **changes) if changes else self

    @property
    def empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))


NOTHING = Resources()


@dataclass(frozen=True, slots=True)
class Rule:
    """What the hooks know of the node: the NodeSLO, the node's topology (pools from the
    NodeResourceTopology status, ``None`` until it is known) and the agent's options."""

    slo: api.NodeSLO = field(default_factory=api.NodeSLO)
    share_pools: tuple[nrt.CPUSharedPool, ...] | None = None
    be_share_pools: tuple[nrt.CPUSharedPool, ...] = ()
    kubelet_policy: str = ""
    system_qos_cpuset: str = ""
    be_cpu_manager: bool = False
    """Gate ``BECPUManager``: BE pods placed on NUMA nodes get the BE share pools of those nodes."""
    unset_cpu_quota: bool = True
    """Not ``--disable-unset-cpu-quota``: pods with bound CPUs run without a CFS quota."""
    group_identity: bool = True
    """Whether this kernel has ``cpu.bvt_warp_ns`` (GroupIdentity answers nothing otherwise)."""
    core_sched: bool = True
    """Whether this kernel does core scheduling (CoreSched answers nothing otherwise)."""


class Hook(Protocol):
    """A runtime hook: ``name`` is its Koordinator feature gate."""

    name: str

    def pod(self, req: PodRequest, rule: Rule) -> Resources:
        """PreRunPodSandbox: the pod cgroup's values."""
        ...

    def container(self, req: ContainerRequest, rule: Rule) -> Resources:
        """PreCreateContainer / PreUpdateContainerResources: the container cgroup's values."""
        ...

    # Optional: ``kube_qos(kube_qos, rule) -> Resources``, the kube-QoS tier dir's values (full passes).


def request_qos(pod: api.PodInfo) -> api.QOSClass:
    """Koordinator's ``PodQOSFilter``: the labelled class; an unlabelled pod bound to CPUs is LSR."""
    if pod.qos_raw is api.QOSClass.NONE and bound_cpuset(pod.annotations):
        return api.QOSClass.LSR
    return pod.qos_raw


def bound_cpuset(annotations: Mapping[str, str]) -> str:
    """The ``resource-status`` cpuset, canonical; ``""`` when there is none or it is malformed (a
    malformed placement binds nothing: the pod stays where it is)."""
    try:
        return numa.resource_status(annotations).cpuset
    except InvalidValue:
        return ""
