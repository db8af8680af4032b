"""Koordinator's fine-grained CPU orchestration on the pod (its ``apis/extension/numa_aware.go``): what a
pod asks for (``resource-spec``, ``numa-topology-spec``), what koord-scheduler decided
(``resource-status``: the cpuset and the NUMA nodes), and the node labels that steer the choice.

This is one half of the node-scheduler contract (``docs/node-scheduler-contract.md``): the scheduler writes
``resource-status`` in PreBind, the agent's runtime hooks pin the containers to it. Pure: stdlib only.
JSON is written the way Go's ``encoding/json`` writes these structs (field order, ``omitempty``, no spaces),
so an annotation the agent or the scheduler writes is byte-equal to Koordinator's.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordshared.apis.meta.cpulist import format_cpuset, parse_cpuset
from koordshared.runtime.errors import InvalidValue

ANNOTATION_RESOURCE_SPEC = "scheduling.koordinator.sh/resource-spec"
ANNOTATION_RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
ANNOTATION_NUMA_TOPOLOGY_SPEC = "scheduling.koordinator.sh/numa-topology-spec"

LABEL_NODE_CPU_BIND_POLICY = "node.koordinator.sh/cpu-bind-policy"
LABEL_NODE_NUMA_ALLOCATE_STRATEGY = "node.koordinator.sh/numa-allocate-strategy"
LABEL_NUMA_TOPOLOGY_POLICY = "node.koordinator.sh/numa-topology-policy"


class CPUBindPolicy(enum.StrEnum):
    DEFAULT = "Default"
    FULL_PCPUS = "FullPCPUs"
    SPREAD_BY_PCPUS = "SpreadByPCPUs"
    CONSTRAINED_BURST = "ConstrainedBurst"


class CPUExclusivePolicy(enum.StrEnum):
    NONE = "None"
    PCPU_LEVEL = "PCPULevel"
    NUMA_NODE_LEVEL = "NUMANodeLevel"


class NodeCPUBindPolicy(enum.StrEnum):
    NONE = "None"
    FULL_PCPUS_ONLY = "FullPCPUsOnly"
    SPREAD_BY_PCPUS = "SpreadByPCPUs"


class NUMAAllocateStrategy(enum.StrEnum):
    MOST_ALLOCATED = "MostAllocated"
    LEAST_ALLOCATED = "LeastAllocated"
    DISTRIBUTE_EVENLY = "DistributeEvenly"


class NUMATopologyPolicy(enum.StrEnum):
    NONE = ""
    BEST_EFFORT = "BestEffort"
    RESTRICTED = "Restricted"
    SINGLE_NUMA_NODE = "SingleNUMANode"


def dumps(value: Any) -> str:
    """JSON as Go's ``json.Marshal`` writes it: compact, keys in the order given, non-ASCII kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def loads_annotation(annotations: Mapping[str, str], key: str) -> Any:
    """The JSON of annotation ``key``; ``None`` when absent. Malformed JSON is :class:`InvalidValue`,
    as Koordinator's getters return an error for it (the caller decides whether that stops it)."""
    text = annotations.get(key)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as err:
        raise InvalidValue(key, text[:200], f"not JSON: {err}") from err


# Field readers of annotation JSON: ``key`` names the annotation in the InvalidValue they raise.


def json_object(value: Any, key: str) -> Mapping[str, Any]:
    """A JSON object (``{}`` for null/absent)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidValue(key, value, "want a JSON object")
    return value


def json_list(value: Any, key: str) -> list[Any]:
    """A JSON list (``[]`` for null/absent)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidValue(key, value, "want a JSON list")
    return value


def json_int(doc: Mapping[str, Any], field: str, key: str) -> int:
    value = doc.get(field, 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidValue(key, value, f"{field} must be an integer")
    return value


def json_string(doc: Mapping[str, Any], field: str, key: str) -> str:
    value = doc.get(field, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidValue(key, value, f"{field} must be a string")
    return value


def json_cpus(doc: Mapping[str, Any], field: str, key: str) -> str:
    """A cpu-list field, canonical (``"3,0-2"`` -> ``"0-3"``); ``""`` when absent."""
    text = json_string(doc, field, key)
    return format_cpuset(parse_cpuset(text, resource=key)) if text else ""


@dataclass(frozen=True, slots=True)
class NUMANodeResource:
    """One NUMA node a pod was placed on and what it got there (quantities as the API writes them)."""

    node: int
    resources: Mapping[str, str]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.node}
        if self.resources:
            out["resources"] = dict(self.resources)
        return out


@dataclass(frozen=True, slots=True)
class ResourceStatus:
    """``scheduling.koordinator.sh/resource-status``: the scheduler's placement of a pod."""

    cpuset: str = ""
    """The CPUs bound to an LSE/LSR pod, Linux cpu-list syntax; empty for a pod on the shared pools."""
    numa_node_resources: tuple[NUMANodeResource, ...] = ()

    @property
    def cpus(self) -> frozenset[int]:
        return parse_cpuset(self.cpuset, resource=ANNOTATION_RESOURCE_STATUS)

    def numa_nodes_with_cpu(self) -> tuple[int, ...]:
        """NUMA nodes where the pod got CPU (``cpu`` or ``kubernetes.io/batch-cpu`` not zero): such a pod
        runs on those nodes' share pools (Koordinator's cpuset rule ``isNUMAAware``)."""
        out = []
        for numa in self.numa_node_resources:
            for name in ("cpu", "kubernetes.io/batch-cpu"):
                raw = numa.resources.get(name)
                if raw is not None and str(raw).strip() not in ("", "0", "0m"):
                    out.append(numa.node)
                    break
        return tuple(out)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.cpuset:
            out["cpuset"] = self.cpuset
        if self.numa_node_resources:
            out["numaNodeResources"] = [n.to_json() for n in self.numa_node_resources]
        return out

    def annotation(self) -> str:
        return dumps(self.to_json())


def resource_status(annotations: Mapping[str, str]) -> ResourceStatus:
    """Koordinator's ``GetResourceStatus``: the empty status when the annotation is absent; a malformed one
    (bad JSON, a cpuset that does not parse, bad NUMA entries) is :class:`InvalidValue`."""
    key = ANNOTATION_RESOURCE_STATUS
    doc = json_object(loads_annotation(annotations, key), key)
    cpuset = json_cpus(doc, "cpuset", key)
    numa: list[NUMANodeResource] = []
    for item in json_list(doc.get("numaNodeResources"), key):
        entry = json_object(item, key)
        node = entry.get("node", 0)
        if isinstance(node, bool) or not isinstance(node, int) or node < 0:
            raise InvalidValue(key, node, "numaNodeResources[].node must be a non-negative integer")
        res = json_object(entry.get("resources"), key)
        numa.append(NUMANodeResource(node, {str(k): str(v) for k, v in res.items()}))
    return ResourceStatus(cpuset, tuple(numa))


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """``scheduling.koordinator.sh/resource-spec``: how the pod wants its CPUs bound."""

    required_cpu_bind_policy: str = ""
    preferred_cpu_bind_policy: str = ""
    preferred_cpu_exclusive_policy: str = ""

    def to_json(self) -> dict[str, Any]:
        pairs = (
            ("requiredCPUBindPolicy", self.required_cpu_bind_policy),
            ("preferredCPUBindPolicy", self.preferred_cpu_bind_policy),
            ("preferredCPUExclusivePolicy", self.preferred_cpu_exclusive_policy),
        )
        return {k: v for k, v in pairs if v}


def resource_spec(annotations: Mapping[str, str]) -> ResourceSpec:
    key = ANNOTATION_RESOURCE_SPEC
    doc = json_object(loads_annotation(annotations, key), key)
    return ResourceSpec(
        json_string(doc, "requiredCPUBindPolicy", key),
        json_string(doc, "preferredCPUBindPolicy", key),
        json_string(doc, "preferredCPUExclusivePolicy", key),
    )


@dataclass(frozen=True, slots=True)
class NUMATopologySpec:
    """``scheduling.koordinator.sh/numa-topology-spec``."""

    numa_topology_policy: str = ""
    single_numa_node_exclusive: str = ""

    def to_json(self) -> dict[str, Any]:
        pairs = (
            ("numaTopologyPolicy", self.numa_topology_policy),
            ("singleNUMANodeExclusive", self.single_numa_node_exclusive),
        )
        return {k: v for k, v in pairs if v}


def numa_topology_spec(annotations: Mapping[str, str]) -> NUMATopologySpec:
    key = ANNOTATION_NUMA_TOPOLOGY_SPEC
    doc = json_object(loads_annotation(annotations, key), key)
    return NUMATopologySpec(
        json_string(doc, "numaTopologyPolicy", key), json_string(doc, "singleNUMANodeExclusive", key)
    )
