"""GPU allocation (Koordinator's ``GPUAllocator``, ``allocator_gpu.go``): a shared-resource template when the
pod must match one, else whole GPUs from the partition table when asked for or honoured, else the
narrowest topology scope (PCIe switch, NUMA node, node) with enough free GPUs, else the default
allocator. Details: ``docs/modules.md``."""

from __future__ import annotations

from dataclasses import dataclass

from koord.scheduler.framework import Code, Status
from koord.scheduler.plugins.deviceshare import resources as rs
from koord.scheduler.plugins.deviceshare.devicepick import AllocationFailed, Request, allocate_default
from koord.scheduler.plugins.deviceshare.gputopology import (
    PartitionIndexer,
    Scope,
    designated_indexer,
    hash_minors,
)
from koord.scheduler.plugins.deviceshare.nodedevice import NodeDevice
from koord.scheduler.plugins.deviceshare.resources import Devices
from koord.scheduler.plugins.deviceshare.scoring import Scorer
from koord.scheduler.plugins.deviceshare.state import NO_MATCHED_TEMPLATE, GPURequirements
from koordshared.apis.extension.deviceshare import DeviceAllocation
from koordshared.apis.scheduling import device as dv

NO_GPU_REQUIREMENTS = "No GPU Requirements"
INSUFFICIENT_PARTITIONED = "Insufficient Partitioned GPU Devices"
INSUFFICIENT_TOPOLOGY_SCOPED = "Insufficient Topology Scoped GPU Devices"
INSUFFICIENT_GPUS = "Insufficient GPU Devices"
MISSING_PARTITION_TABLE = "node(s) missing GPU Partition Table"
UNSUPPORTED_GPU_COUNT = "node(s) Unsupported number of GPU requests"
UNSUPPORTED_MULTI_SHARED = "node(s) Unsupported Multi-Shared GPU"
MISSING_TOPOLOGY_TREE = "node(s) missing GPU Device Topology Tree"
BIN_PACK_WEIGHTS = ((8, 10000), (4, 100), (2, 1))
_AVAILABILITY = ("gpu availability",)


@dataclass(frozen=True, slots=True)
class Context:
    """``AllocateContext``: the GPUs not available in this view (as a bit set), free and total ones."""

    used_hash: int
    free: Devices
    total: Devices
    scorer: Scorer | None


def _failed(status: Status) -> AllocationFailed:
    return AllocationFailed(status)


def allocate(req: Request, view: NodeDevice, count: int, most: int) -> list[DeviceAllocation]:
    gpu = req.state.gpu
    if gpu is None:
        raise _failed(Status.unschedulable(NO_GPU_REQUIREMENTS))
    indexer, node_honors = view.gpu_partitions, view.honor_gpu_partition
    if indexer is None:
        indexer, node_honors = designated_indexer(req.node)
    used_hash, total = _availability(req.original, view)
    ctx = Context(used_hash, view.free.get(dv.GPU, {}), total, req.scorer)
    if gpu.enforce_template:
        return _by_template(req, view, gpu, count, most, ctx)
    got = _by_partition(gpu.honor_partition or node_honors, gpu, indexer, ctx)
    return got or _general(req, view, gpu, count, most, ctx)


def _availability(original: NodeDevice, view: NodeDevice) -> tuple[int, Devices]:
    """The GPUs not available in ``view`` (as a bit set) and those with something, kept with the node's
    devices while they do not change when the view is the node's devices as they are."""
    if view is original:
        found = view.memo.get(_AVAILABILITY)
        if found is not None:
            kept: tuple[int, Devices] = found[1]
            return kept
    view_total = view.total.get(dv.GPU, {})
    # Not available here: used, or left out of the view (another NUMA node, a selector, a reservation).
    real_used = {m for m in original.used.get(dv.GPU, {}) if m not in view_total}
    real_used.update(view.used.get(dv.GPU, {}))
    got = hash_minors(sorted(real_used)), {m: r for m, r in view_total.items() if not rs.is_zero(r)}
    if view is original:
        view.remember(_AVAILABILITY, None, got)
    return got


def _by_template(
    req: Request, view: NodeDevice, gpu: GPURequirements, count: int, most: int, ctx: Context
) -> list[DeviceAllocation]:
    labels = dv.labels_of(req.node) if req.node is not None else {}
    key = f"{labels.get(dv.LABEL_GPU_VENDOR, '')}-{labels.get(dv.LABEL_GPU_MODEL, '')}"
    candidates = gpu.templates.get(key) or {}
    if not candidates:
        raise _failed(Status.unresolvable(NO_MATCHED_TEMPLATE))
    got = _general(req, view, gpu, count, most, ctx)
    if len(candidates) == 1:
        (name,) = candidates
        got = [DeviceAllocation(a.minor, a.resources, a.id, a.vfs, name) for a in got]
    return got


def _by_partition(
    honor: bool, gpu: GPURequirements, indexer: PartitionIndexer | None, ctx: Context
) -> list[DeviceAllocation]:
    """Whole GPUs of one partition; a failure counts only when partitions are honoured."""
    if gpu.shared:
        return []
    try:
        return _partition(gpu, indexer, ctx)
    except AllocationFailed:
        if honor:
            raise
        return []


def _partition(
    gpu: GPURequirements, indexer: PartitionIndexer | None, ctx: Context
) -> list[DeviceAllocation]:
    if indexer is None:
        raise _failed(Status.unresolvable(MISSING_PARTITION_TABLE))
    groups = indexer.get(gpu.count)
    if groups is None:
        raise _failed(Status.unresolvable(UNSUPPORTED_GPU_COUNT))
    total_hash = hash_minors(sorted(ctx.total))
    feasible = []
    for group in groups:
        for p in group.partitions:
            h = p.minors_hash
            if h & ctx.used_hash or total_hash & h != h:
                continue
            if gpu.ring_bus_bandwidth is not None and (
                p.ring_bus_bandwidth is None or gpu.ring_bus_bandwidth > p.ring_bus_bandwidth
            ):
                continue
            feasible.append(p)
        if feasible or gpu.restricted_partition:
            break  # the lowest score group with a free partition (Restricted: the lowest group only)
    if not feasible:
        raise _failed(Status.unschedulable(INSUFFICIENT_PARTITIONED))
    chosen = feasible[0]
    if len(feasible) > 1:

        def left_free(p: dv.GPUPartition) -> int:
            taken = ctx.used_hash | p.minors_hash
            score = 0
            for n, weight in BIN_PACK_WEIGHTS:
                if n < gpu.count or not indexer.get(n):
                    continue
                score += sum(
                    weight * q.allocation_score for q in indexer[n][0].partitions if not q.minors_hash & taken
                )
            return score

        chosen = sorted(feasible, key=left_free, reverse=True)[0]
    return [DeviceAllocation(m, dict(gpu.per_gpu)) for m in chosen.minors]


def _general(
    req: Request, view: NodeDevice, gpu: GPURequirements, count: int, most: int, ctx: Context
) -> list[DeviceAllocation]:
    try:
        got = _by_topology(gpu, view.gpu_topology, ctx)
    except AllocationFailed as failed:
        if gpu.required_scope or failed.status.code is not Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            raise
        got = []
    return got or allocate_default(req, view, dv.GPU, gpu.per_gpu, count, most, ())


def _by_topology(gpu: GPURequirements, tree: Scope | None, ctx: Context) -> list[DeviceAllocation]:
    if tree is None:
        raise _failed(Status.unresolvable(MISSING_TOPOLOGY_TREE))
    if gpu.shared and gpu.count > 1:
        raise _failed(Status.unresolvable(UNSUPPORTED_MULTI_SHARED))
    found = _from_scope(gpu, tree, ctx, 0, 0, {})
    if found is None:
        raise _failed(
            Status.unschedulable(INSUFFICIENT_TOPOLOGY_SCOPED if gpu.required_scope else INSUFFICIENT_GPUS)
        )
    return found.allocations


@dataclass(frozen=True, slots=True)
class _Found:
    allocations: list[DeviceAllocation]
    busy_scopes: int
    """How many scopes on the way down already had GPUs in use (more: better packing)."""
    depth: int
    score: int


def _from_scope(
    gpu: GPURequirements,
    scope: Scope,
    ctx: Context,
    busy: int,
    depth: int,
    devices: dict[int, tuple[bool, int]],
) -> _Found | None:
    """``allocateFromScope``: the deepest child scope that can take the GPUs (ties: the busier one; for a
    shared GPU, then the better score), else this scope's own GPUs when its level is allowed."""
    if len(scope.minors) < gpu.count:
        return None
    depth += 1
    if scope.minors_hash & ctx.used_hash:
        busy += 1
    best: _Found | None = None
    for child in scope.children:
        if len(child.minors) < gpu.count:
            continue
        got = _from_scope(gpu, child, ctx, busy, depth, devices)
        if got is None or not got.allocations:
            continue
        if best is None:
            best = got
            continue
        if best.depth < got.depth or (best.depth == got.depth and best.busy_scopes < got.busy_scopes):
            best = got
        if (
            gpu.shared
            and (best.depth, best.busy_scopes) == (got.depth, got.busy_scopes)
            and best.score < got.score
        ):
            best = got
    if best is not None:
        return best
    if gpu.required_scope_level > scope.level:
        return None
    picked: list[int] = []
    best_minor, best_score, satisfied = -1, -1, False
    for minor in scope.minors:
        if minor not in devices:
            free = ctx.free.get(minor)
            ok = rs.fits(gpu.per_gpu, free) and minor in ctx.total
            score = 0
            if ok and gpu.shared and ctx.scorer is not None:
                score = ctx.scorer.score_device(gpu.per_gpu, scope.resources.get(minor, {}), free or {})
            devices[minor] = (ok, score)
        ok, score = devices[minor]
        if not ok:
            continue
        if not gpu.shared:
            picked.append(minor)
            if len(picked) == gpu.count:
                satisfied = True
                break
            continue
        satisfied = True
        if score > best_score:
            best_minor, best_score = minor, score
    if not satisfied:
        return None
    if gpu.shared:
        picked.append(best_minor)
    return _Found([DeviceAllocation(m, dict(gpu.per_gpu)) for m in picked], busy, depth, best_score)
