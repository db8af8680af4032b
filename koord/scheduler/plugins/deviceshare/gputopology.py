"""What DeviceShare derives from a Device's GPUs once per Device update (Koordinator's
``allocator_gpu_helper.go``): the partition indexer (which sets of GPUs may be allocated together for a
given count, grouped by allocation score) and the topology tree (node -> NUMA nodes -> PCIe switches, each
scope with its GPUs), and the built-in partition table of NVIDIA Hopper nodes (H100, H800, H20: NVLink
pairs, quads and the whole 8).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koord.scheduler.plugins.deviceshare.resources import Devices
from koordshared.apis.extension.deviceshare import (
    SCOPE_NODE,
    SCOPE_NUMA_NODE,
    SCOPE_PCIE,
    TOPOLOGY_SCOPE_LEVEL,
)
from koordshared.apis.scheduling.device import (
    GPU_VENDOR_NVIDIA,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    PARTITION_POLICY_HONOR,
    DeviceInfo,
    GPUPartition,
    labels_of,
    partition_policy,
)


def hash_minors(minors: Sequence[int] | Mapping[int, Any]) -> int:
    """A set of minors as a bit set (Koordinator's ``hashMinors``/``hashDevices``)."""
    out = 0
    for m in minors:
        out |= 1 << m
    return out


@dataclass(frozen=True, slots=True)
class ScoreGroup:
    """The partitions of one GPU count with the same allocation score."""

    score: int
    partitions: tuple[GPUPartition, ...]


PartitionIndexer = dict[int, list[ScoreGroup]]
"""GPU count -> its partitions by allocation score, lowest score first (as Koordinator sorts them)."""


def partition_indexer(table: Mapping[int, Sequence[GPUPartition]] | None) -> PartitionIndexer | None:
    """``GetGPUPartitionIndexer``."""
    if table is None:
        return None
    out: PartitionIndexer = {}
    for count, partitions in table.items():
        by_score: dict[int, list[GPUPartition]] = {}
        for p in partitions:
            by_score.setdefault(p.allocation_score, []).append(p)
        out[count] = [ScoreGroup(s, tuple(by_score[s])) for s in sorted(by_score)]
    return out


def _hopper() -> PartitionIndexer:
    groups = {
        1: [[m] for m in range(8)],
        2: [[0, 1], [2, 3], [4, 5], [6, 7]],
        4: [[0, 1, 2, 3], [4, 5, 6, 7]],
    }
    groups[8] = [list(range(8))]
    return {
        n: [ScoreGroup(1, tuple(GPUPartition(tuple(ms), "NVLink", None, 1) for ms in sets))]
        for n, sets in groups.items()
    }


HOPPER = _hopper()
"""Koordinator's ``GPUPartitionIndexOfNVIDIAHopper``."""
HOPPER_MODELS = ("H100", "H800", "H20")


def designated_indexer(node: Mapping[str, Any] | None) -> tuple[PartitionIndexer | None, bool]:
    """``GetDesignatedGPUPartitionIndexer``: the built-in table for the node's GPU model (an empty vendor
    counts as NVIDIA), and whether the node's partition policy is Honor."""
    labels = labels_of(node) if node is not None else {}
    vendor = labels.get(LABEL_GPU_VENDOR, "")
    indexer = None
    if vendor in ("", GPU_VENDOR_NVIDIA) and labels.get(LABEL_GPU_MODEL) in HOPPER_MODELS:
        indexer = HOPPER
    return indexer, partition_policy(node) == PARTITION_POLICY_HONOR


@dataclass(eq=False)
class Scope:
    """One scope of the GPU topology tree (Koordinator's ``GPUTopologyScope``)."""

    name: str
    level: int
    resources: Devices
    """The GPUs of the scope with what each has (as the Device said when the tree was built)."""
    minors: tuple[int, ...]
    minors_hash: int
    children: list[Scope] = field(default_factory=list)


def _scope(name: str, resources: Devices) -> Scope:
    minors = tuple(sorted(resources))
    return Scope(name, TOPOLOGY_SCOPE_LEVEL[name], resources, minors, hash_minors(minors))


def topology_tree(infos: Sequence[DeviceInfo], total: Mapping[int, Mapping[str, int]]) -> Scope | None:
    """``GetGPUTopologyScope``: ``None`` when there is no GPU or one lacks topology."""
    if not infos or any(d.topology is None for d in infos):
        return None
    numa: dict[int, Devices] = {}
    pcie: dict[int, dict[str, Devices]] = {}
    for d in infos:
        assert d.topology is not None
        res = dict(total.get(d.minor, {}))
        numa.setdefault(d.topology.node_id, {})[d.minor] = res
        pcie.setdefault(d.topology.node_id, {}).setdefault(d.topology.pcie_id, {})[d.minor] = res
    root = _scope(SCOPE_NODE, {m: dict(r) for m, r in total.items()})
    for node_id in sorted(numa):
        scope = _scope(SCOPE_NUMA_NODE, numa[node_id])
        scope.children = [_scope(SCOPE_PCIE, pcie[node_id][p]) for p in sorted(pcie[node_id])]
        root.children.append(scope)
    return root
