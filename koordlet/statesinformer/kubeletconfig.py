"""What the node topology report needs from the kubelet: its CPU manager and topology manager settings
(``/configz``, as koordlet's ``GetKubeletConfiguration``), the CPUs its static policy keeps for system
daemons (koordlet's ``GetStaticCPUManagerPolicyReservedCPUs``), and the CPUs it gave containers exclusively
(its ``cpu_manager_state`` checkpoint).

Reserved CPUs are ``reservedSystemCPUs`` when set, else ``ceil(kubeReserved.cpu + systemReserved.cpu)``
CPUs taken by :func:`take_by_topology` (whole sockets, then whole NUMA nodes, then whole cores, then single
CPUs, lowest ids first: the kubelet's NUMA-packed take on a node with nothing allocated yet).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koordlet import api
from koordshared.apis.meta.cpulist import format_cpuset, parse_cpuset
from koordshared.apis.meta.quantity import to_milli
from koordshared.runtime.errors import InvalidValue

CONFIGZ_PATH = "/configz"
STATIC = "static"


@dataclass(frozen=True, slots=True)
class KubeletConfig:
    """The kubelet settings the topology report uses (``KubeletConfiguration`` field names)."""

    cpu_manager_policy: str = "none"
    cpu_manager_policy_options: Mapping[str, str] = field(default_factory=dict)
    reserved_system_cpus: str = ""
    reserved_cpu_milli: int = 0
    """``kubeReserved.cpu + systemReserved.cpu``."""
    topology_manager_policy: str = "none"
    topology_manager_scope: str = "container"


def _str_map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def parse_configz(doc: Any) -> KubeletConfig:
    """The ``/configz`` answer (``{"kubeletconfig": {...}}``); :class:`InvalidValue` when it is not one.
    Absent fields take the kubelet's defaults."""
    conf = doc.get("kubeletconfig") if isinstance(doc, Mapping) else None
    if not isinstance(conf, Mapping):
        raise InvalidValue("configz", str(doc)[:200], "no kubeletconfig object")
    reserved = 0
    for section in ("kubeReserved", "systemReserved"):
        cpu = _str_map(conf.get(section)).get("cpu")
        if cpu:
            reserved += to_milli(cpu)
    reserved_cpus = str(conf.get("reservedSystemCPUs") or "")
    if reserved_cpus:
        reserved_cpus = format_cpuset(parse_cpuset(reserved_cpus, resource="reservedSystemCPUs"))
    return KubeletConfig(
        cpu_manager_policy=str(conf.get("cpuManagerPolicy") or "none"),
        cpu_manager_policy_options=_str_map(conf.get("cpuManagerPolicyOptions")),
        reserved_system_cpus=reserved_cpus,
        reserved_cpu_milli=reserved,
        topology_manager_policy=str(conf.get("topologyManagerPolicy") or "none"),
        topology_manager_scope=str(conf.get("topologyManagerScope") or "container"),
    )


def take_by_topology(cpus: Sequence[api.CPUInfo], count: int) -> frozenset[int]:
    """``count`` CPUs packed on the lowest sockets, NUMA nodes and cores; all of them when fewer exist."""
    if count <= 0:
        return frozenset()
    free = {c.cpu: c for c in cpus}
    taken: set[int] = set()

    def take_groups(key: Any) -> None:
        groups: dict[Any, list[int]] = {}
        for c in sorted(free.values(), key=lambda c: c.cpu):
            groups.setdefault(key(c), []).append(c.cpu)
        for members in sorted(groups.values(), key=lambda m: m[0]):
            if count - len(taken) >= len(members):
                taken.update(members)
                for cpu in members:
                    free.pop(cpu)

    take_groups(lambda c: c.socket)
    take_groups(lambda c: (c.socket, c.node))
    take_groups(lambda c: c.core)
    for cpu in sorted(free):
        if len(taken) >= count:
            break
        taken.add(cpu)
    return frozenset(taken)


def static_reserved_cpus(config: KubeletConfig, cpus: Sequence[api.CPUInfo]) -> frozenset[int]:
    """The CPUs the static policy keeps out of exclusive allocation; none under another policy."""
    if config.cpu_manager_policy != STATIC:
        return frozenset()
    if config.reserved_system_cpus:
        return parse_cpuset(config.reserved_system_cpus, resource="reservedSystemCPUs")
    return take_by_topology(cpus, math.ceil(config.reserved_cpu_milli / 1000))


@dataclass(frozen=True, slots=True)
class CPUManagerCheckpoint:
    """The kubelet's ``cpu_manager_state``: its policy and, per pod UID, the CPUs of each container."""

    policy_name: str = ""
    entries: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


def parse_checkpoint(text: str | None) -> CPUManagerCheckpoint:
    """The checkpoint's JSON; an absent, empty or unreadable file is an empty checkpoint."""
    if not text:
        return CPUManagerCheckpoint()
    try:
        doc = json.loads(text)
    except ValueError:
        return CPUManagerCheckpoint()
    if not isinstance(doc, Mapping):
        return CPUManagerCheckpoint()
    entries = doc.get("entries")
    pods = {
        str(uid): _str_map(containers)
        for uid, containers in (entries.items() if isinstance(entries, Mapping) else ())
        if isinstance(containers, Mapping)
    }
    return CPUManagerCheckpoint(str(doc.get("policyName") or ""), pods)
