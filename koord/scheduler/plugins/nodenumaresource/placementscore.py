"""NodeNUMAResource's Score (Koordinator's ``scoring.go``): the resource scorer over the node, or, under a
NUMA policy, over the NUMA nodes the pod would get with its CPUs counted whole (:func:`numa_score`).
Nodes nothing steers are scored together over the snapshot's arrays; the others one by one, once per kind
of node (same report, holding, labels, affinity and requests), the decision also remembered across cycles.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from koord.scheduler.framework import SKIP, CycleState, NodeInfo, NodeSet, Obj, PodInfo, Status
from koord.scheduler.framework import topologymanager as tm
from koord.scheduler.framework.snapshot import Snapshot
from koord.scheduler.plugins.nodenumaresource.affinities import KindAffinities
from koord.scheduler.plugins.nodenumaresource.allocation import NodeAllocation, PodAllocation, add, add_numa
from koord.scheduler.plugins.nodenumaresource.allocator import ResourceOptions
from koord.scheduler.plugins.nodenumaresource.kinds import one_of_each
from koord.scheduler.plugins.nodenumaresource.placement import LABELLED_COLUMN, Placement
from koord.scheduler.plugins.nodenumaresource.restorestate import NodeRestoreState
from koord.scheduler.plugins.nodenumaresource.scoring import Scorer
from koord.scheduler.plugins.nodenumaresource.topologyoptions import steers_by_labels
from koordshared.apis.extension.numa import NUMATopologyPolicy

RESOURCES_COLUMN = "NodeNUMAResource/resources"


class ScoredPlacement(Placement):
    """:class:`.placement.Placement` with PreScore and Score."""

    resource_codes: ResourceCodes

    # ---- Score --------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Status | None:
        return SKIP if self._state(state).skip else None

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        s = self._state(state)
        node = node_info.node
        if s.skip or node is None:
            return 0
        opts = self.manager.options(node_info.name)
        policy, _, binds, st = self._policies(s, node, opts)
        if st is not None or (binds and not opts.topology.valid):
            return 0
        if policy is NUMATopologyPolicy.NONE:
            return self.scorer.score(node_info.requested, node_info.allocatable, s.requests)
        affinity = tm.store(state).get_affinity(node_info.name)
        ro = self.options(s, node, binds, opts, affinity)
        with self.manager.locked():
            na = self.manager.allocation(node_info.name)
            base = self._memo_key(state, node_info.name, node, na, opts)
            key = None
            if base is not None:
                resources = (_items(node_info.requested), _items(node_info.allocatable))
                key = ("score", policy, affinity, *base, *resources)
                hit = self.memo.get(key)
                if hit is not None:
                    return int(hit)
            alloc, st = self._try(state, pod, node, ro, policy, base)
            # Filter passed it: a placement failing now only costs the node its score
            got = (
                0
                if st is not None or alloc is None
                else numa_score(
                    self.scorer,
                    self.manager.allocation(node_info.name),
                    node_info,
                    alloc,
                    ro,
                    self.restore_state(state, node_info.name),
                )
            )
            if key is not None:
                self.memo.put(key, got)
            return got

    def score_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
        s = self._state(state)
        if nodes.rows is None or nodes.snapshot is None:
            return np.asarray([self.score(state, pod, ni) for ni in nodes], dtype=np.int64)
        if s.pod_numa_policy is not NUMATopologyPolicy.NONE:  # every node is scored by itself below
            out = np.zeros(len(nodes), dtype=np.int64)
            look = np.ones(len(nodes), dtype=bool)
        else:
            info = state.pod_info if state.pod_info is not None else PodInfo(pod)
            out = self.scorer.score_nodes(nodes, info)
            labelled = nodes.column(LABELLED_COLUMN, steers_by_labels, bool)
            assert labelled is not None  # the nodes have rows
            look = labelled | self._among(nodes, self.manager.steering())
        at = np.flatnonzero(look)
        if not len(at):
            return out
        codes = self.kind_codes.codes(nodes)
        if codes is None or nodes.snapshot is None or nodes.rows is None:
            return self._score_one_by_one(state, pod, nodes, at.tolist(), out)
        groups = self._grouped(state, nodes, codes, chosen=True)[at]
        # Alike: the same kind, the same NUMA affinity chosen, the same requested and allocatable.
        rows = nodes.rows[at]
        chosen = _chosen(tm.store(state), nodes.snapshot, rows)
        alike = np.flatnonzero(groups > 0)
        for i in np.flatnonzero(groups < 0).tolist():
            out[at[i]] = self.score(state, pod, nodes.info(int(at[i])))
        if len(alike):
            resources = self.resource_codes.codes(nodes.snapshot, rows[alike])
            one, inverse = _alike(groups[alike], chosen[alike], resources)
            got = np.asarray(
                [self.score(state, pod, nodes.info(int(at[i]))) for i in alike[one].tolist()],
                dtype=np.int64,
            )
            out[at[alike]] = got[inverse.reshape(-1)]
        return out

    def _score_one_by_one(
        self, state: CycleState, pod: Obj, nodes: NodeSet, at: list[int], out: np.ndarray
    ) -> np.ndarray:
        """``score_nodes`` without rows: once per kind of node, affinity, requested and allocatable."""
        store = tm.store(state)
        seen: dict[tuple[Any, ...], int] = {}
        infos = [nodes.info(i) for i in at]
        for i, ni, kind in zip(at, infos, self._kinds(state, infos, chosen=True), strict=True):
            key = kind
            if key is not None:
                key = (*key, store.get_affinity(ni.name), *map(_items, (ni.requested, ni.allocatable)))
                if key in seen:
                    out[i] = seen[key]
                    continue
            out[i] = got = self.score(state, pod, ni)
            if key is not None:
                seen[key] = got
        return out


def _chosen(store: tm.Store, snap: Snapshot, rows: np.ndarray) -> np.ndarray:
    """The affinity chosen on each row by its object's id (equal objects, equal affinities: a kind's
    nodes share one): the shared ones by row, then the few nodes' own that differ."""
    shared = store.shared
    if isinstance(shared, KindAffinities) and shared.of(snap):
        ids = np.fromiter(map(id, (None, *shared.hints)), dtype=np.int64, count=len(shared.hints) + 1)
        out: np.ndarray = ids[shared.indices(rows) + 1]
    else:
        shared = None
        out = np.full(len(rows), id(None), dtype=np.int64)
    own = {
        row: id(hint)
        for name, hint in store.affinity.items()
        if (shared is None or hint is not shared.get(name)) and (row := snap.index.get(name)) is not None
    }
    if own:
        at = np.flatnonzero(np.isin(rows, list(own)))
        out[at] = [own[r] for r in rows[at].tolist()]
    return out


def _alike(groups: np.ndarray, chosen: np.ndarray, resources: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One node of each group of alike nodes (equal kind, affinity chosen, requested and allocatable:
    ``resources``, :class:`ResourceCodes`) and each node's group. The nodes of a kind are usually alike
    (their holding came with their pods' requests): grouped by kind without a sort, and checked; else
    grouped by everything."""
    _, one, inverse = one_of_each(groups)
    if all(np.array_equal(a, a[one][inverse]) for a in (chosen, resources)):
        return one, inverse
    return _alike_rows(np.column_stack((groups, chosen, resources)))


class ResourceCodes:
    """Each row's requested and allocatable as an integer code (equal codes: equal resources), in a
    derived column of the snapshot, so that telling alike nodes apart reads one integer a node. Codes
    are worked out again, under a new column, once the table outgrows the snapshot."""

    def __init__(self) -> None:
        self._table: dict[tuple[Any, ...], int] = {}
        self._generation = 0
        self._lock = threading.Lock()

    def codes(self, snap: Snapshot, rows: np.ndarray) -> np.ndarray:
        with self._lock:
            if len(self._table) > 4 * len(snap) + 1024:
                self._table, self._generation = {}, self._generation + 1
            table = self._table

            def code(ni: NodeInfo) -> int:
                return table.setdefault((_items(ni.requested), _items(ni.allocatable)), len(table))

            column = snap.derived((RESOURCES_COLUMN, self._generation), code, np.int64, transient=True)
            out: np.ndarray = column[rows]
            return out


def _alike_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first of each group of equal rows of ``keys`` and each row's group (``np.unique`` over rows,
    a tenth of its cost: no conversion to one compound value per row)."""
    order = np.lexsort(keys.T[::-1])
    ordered = keys[order]
    starts = np.ones(len(order), dtype=bool)
    starts[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = np.cumsum(starts) - 1
    return order[starts], inverse  # lexsort is stable: a group's first row in order is its first


def _items(resources: dict[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(resources.items()))


def numa_score(
    scorer: Scorer,
    na: NodeAllocation,
    ni: NodeInfo,
    alloc: PodAllocation,
    ro: ResourceOptions,
    restore: NodeRestoreState,
) -> int:
    """``calculateAllocatableAndRequested``: the score of ``alloc`` on the node, over the pod's NUMA
    nodes when it has some, with bound CPUs counted whole."""
    opts = ro.topology
    if alloc.numa:
        reusable = add_numa(restore.unmatched_used, restore.matched_allocated)
        _, used = na.available_numa(opts.numa_resources, reusable)
        allocatable: dict[str, int] = {}
        requested: dict[str, int] = {}
        totals = dict(opts.numa_resources)
        for node, _ in alloc.numa:
            requested = add(requested, used.get(node, {}))
            allocatable = add(allocatable, totals.get(node, {}))
    else:
        allocatable, requested = dict(ni.allocatable), dict(ni.requested)
    if alloc.cpus:
        _, held = na.available_cpus(
            opts.topology, opts.max_refs, opts.reserved_cpus, ro.preferred_cpus - alloc.cpus
        )
        requested["cpu"] = len(held) * 1000
    return scorer.score(requested, allocatable, ro.requests)
