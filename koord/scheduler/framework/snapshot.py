"""The cluster as one scheduling cycle sees it (kube-scheduler's ``cache.Snapshot``): the NodeInfos, in a
stable row order, and the same facts as arrays, one row per node, so a pass over thousands of nodes is a
few vector operations.

``allocatable``, ``requested`` (rows: nodes; columns: :attr:`Snapshot.resources`) and ``non_zero``
(cpu, memory requested with kube-scheduler's scoring defaults) are kept in step with the NodeInfos.
:meth:`Snapshot.derived` gives a plugin its own per-node column, computed once per node change;
:meth:`Snapshot.topology` one for a topology key (each node's domain as an integer code). The cache
updates the snapshot between cycles; during a cycle nothing else writes it. :func:`snapshot_of` gives a
plugin the cluster it looks at in PreFilter/PreScore; a :class:`NodeSet` is the nodes one extension
point is asked about, with their rows.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from typing import Any, overload

import numpy as np

from koord.scheduler.framework.types import CPU, EPHEMERAL, MEMORY, PODS, NodeInfo, PodInfo

_FIRST = (CPU, MEMORY, PODS, EPHEMERAL)
TRANSIENT_COLUMNS = 256
"""How many transient derived columns (keyed by what comes and goes: a label selector, tolerations) a
snapshot keeps; the least recently used go first."""


class Snapshot:
    def __init__(self) -> None:
        self.generation = 0
        """The cache generation this snapshot reflects."""
        self.layout = 0
        """Bumped whenever a row changes hands (a node removed): rows looked up by name stay valid while
        it is unchanged (new nodes only append rows)."""
        self.infos: list[NodeInfo] = []
        self.index: dict[str, int] = {}
        self.resources: list[str] = list(_FIRST)
        self._col = {r: i for i, r in enumerate(self.resources)}
        self._cap = 0
        self.allocatable = np.zeros((0, len(_FIRST)), dtype=np.int64)
        self.requested = np.zeros((0, len(_FIRST)), dtype=np.int64)
        self.non_zero = np.zeros((0, 2), dtype=np.int64)
        self._stamp = np.zeros(0, dtype=np.int64)
        # The stamp of the write that last brought a row a new node object: a column of the node object
        # alone keeps its value across writes of the pods' accounting (a reservation's room restored).
        self._node_stamp = np.zeros(0, dtype=np.int64)
        self._next_stamp = 1
        self._derived: dict[Hashable, tuple[np.ndarray, np.ndarray, Callable[[NodeInfo], Any]]] = {}
        self._of_node: set[Hashable] = set()
        self._transient: OrderedDict[Hashable, None] = OrderedDict()
        self._topology: dict[str, dict[str, int]] = {}
        # (column key, topology key) -> (the column's values, the rows' codes, sums per domain, log position)
        self._sums: OrderedDict[tuple[Hashable, str], tuple[np.ndarray, np.ndarray, np.ndarray, int]] = (
            OrderedDict()
        )
        # Rows written, in order (absolute positions from _log_base), and how far each column has read
        # it: a column catches up on the rows written since, instead of comparing every row's stamp.
        self._log: list[int] = []
        self._log_base = 0
        self._synced: dict[Hashable, int] = {}
        self.with_affinity: list[NodeInfo] = []
        """Nodes with pods that have (anti-)affinity terms; kept by :meth:`refresh_affinity_lists`."""
        self.with_required_anti_affinity: list[NodeInfo] = []
        self._affinity_dirty = True
        self._overlaid: dict[str, NodeInfo | None] = {}
        """Rows given a plugin's copy for one cycle, with what they held before (``None``: no row)."""
        self._held: dict[str, NodeInfo | None] = {}
        """Rows overlaid in the last cycle still showing the overlay (:meth:`put_back` with ``hold``)."""
        self._search_names: list[str] = []
        self._search_version = -1
        self._search_rows: tuple[tuple[int, int, int], np.ndarray] | None = None
        """(order version, layout, nodes) -> the rows in the search order."""

    # ---- reading --------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.infos)

    def node_info(self, name: str) -> NodeInfo | None:
        i = self.index.get(name)
        return None if i is None else self.infos[i]

    def node_infos(self) -> list[NodeInfo]:
        return self.infos

    def column(self, resource: str) -> int:
        """The column of ``resource`` in :attr:`allocatable` and :attr:`requested` (added on first
        use: a resource nothing has asked about yet is 0 everywhere)."""
        col = self._col.get(resource)
        if col is None:
            col = self._add_column(resource)
        return col

    def rotated(self, start: int) -> NodeSet:
        """Every node in the search order (the cache's node tree: one node of each zone in turn; row order
        when none was given), from position ``start`` on and wrapping around."""
        rows = self.search_rows()
        n = len(rows)
        return NodeSet(self, np.roll(rows, -start) if n and start % n else rows)

    def search_rows(self) -> np.ndarray:
        """The rows in the search order (rows the order does not name follow, in row order)."""
        key = (self._search_version, self.layout, len(self.infos))
        if self._search_rows is not None and self._search_rows[0] == key:
            return self._search_rows[1]
        index = self.index
        rows = [index[n] for n in self._search_names if n in index]
        if len(rows) != len(self.infos):
            named = set(rows)
            rows.extend(i for i in range(len(self.infos)) if i not in named)
        arr = np.asarray(rows, dtype=np.int64)
        self._search_rows = (key, arr)
        return arr

    def set_search_order(self, names: list[str], version: int) -> None:
        """The order cycles walk the nodes in (``version`` changes when it does)."""
        if version != self._search_version:
            self._search_names, self._search_version = names, version

    def derived(
        self,
        key: Hashable,
        fn: Callable[[NodeInfo], Any],
        dtype: Any = object,
        *,
        transient: bool = False,
        of_node: bool = False,
    ) -> np.ndarray:
        """``fn(node_info)`` for every row, recomputed only for rows whose node changed since. ``key``
        names the column (one per plugin and meaning: a string, or a tuple with what the column is of);
        ``fn`` must depend on the NodeInfo alone. A subarray ``dtype`` (``(np.float64, (k,))``) makes a
        2-D column of ``k`` values per node. A ``transient`` column is one of many that come and go
        (counts of the pods a selector matches): only the :data:`TRANSIENT_COLUMNS` most recently used
        are kept. A column ``of_node`` (``fn`` reads only the node object and its name) is recomputed
        only for rows given another node object."""
        n = len(self.infos)
        entry = self._derived.get(key)
        if entry is not None and self._synced.get(key) == self._log_base + len(self._log):
            if transient:  # nothing written since the column last caught up
                self._transient.move_to_end(key)
            return entry[0][:n]
        if entry is None:
            values = np.empty(self._cap, dtype=dtype)
            stamps = np.zeros(self._cap, dtype=np.int64)
            entry = self._derived[key] = (values, stamps, fn)
            if of_node:
                self._of_node.add(key)
            if transient:
                self._transient[key] = None
                while len(self._transient) > TRANSIENT_COLUMNS:
                    oldest, _ = self._transient.popitem(last=False)
                    del self._derived[oldest]
                    self._synced.pop(oldest, None)
                    self._of_node.discard(oldest)
        elif transient:
            self._transient.move_to_end(key)
        values, stamps, _ = entry
        if len(values) < self._cap:
            values, stamps = self._grow_derived(key, values.dtype)
        current = self._node_stamp if key in self._of_node else self._stamp
        rows = self._written_since(self._synced.get(key, -1))
        if rows is None:
            stale = np.nonzero(stamps[:n] != current[:n])[0].tolist()
        else:
            stale = [i for i in rows if i < n and stamps[i] != current[i]]
        if stale:
            infos = self.infos
            for i in stale:
                values[i] = fn(infos[i])
            at = np.asarray(stale, dtype=np.int64)
            stamps[at] = current[at]
        self._synced[key] = self._log_base + len(self._log)
        return values[:n]

    def _written_since(self, position: int) -> list[int] | None:
        """The rows written since log ``position``; ``None`` when that is too long ago (compare all)."""
        start = position - self._log_base
        if position < 0 or start < 0 or len(self._log) - start > max(64, len(self.infos) // 8):
            return None
        return list(dict.fromkeys(self._log[start:]))

    def topology(self, key: str) -> tuple[np.ndarray, Mapping[str, int]]:
        """Each row's topology domain for label ``key`` as an integer code (-1: the node has no such
        label), and value -> code. Codes stay valid for the snapshot's life (the table only grows)."""
        table = self._topology.setdefault(key, {})

        def code(ni: NodeInfo) -> int:
            value = ni.labels.get(key)
            return -1 if value is None else table.setdefault(value, len(table))

        return self.derived(("topology", key), code, np.int64, of_node=True), table

    def topology_of(self, nodes: NodeSet, key: str) -> np.ndarray:
        """:meth:`topology` codes of ``nodes``: their rows' when they are this snapshot's, else looked up
        by label (-2: a value no node of this snapshot has)."""
        codes, table = self.topology(key)
        if nodes.snapshot is self and nodes.rows is not None:
            out: np.ndarray = codes[nodes.rows]
            return out
        return np.fromiter(
            (-1 if (v := ni.labels.get(key)) is None else table.get(v, -2) for ni in nodes),
            dtype=np.int64,
            count=len(nodes),
        )

    def domain_sums(self, key: Hashable, values: np.ndarray, topology_key: str) -> np.ndarray:
        """The sum of ``values`` (the integer derived column ``key``, as just read) per domain of
        ``topology_key``, over the codes ``0..len(table)-1`` at least; nodes without the label left out.
        Kept from call to call: only rows whose value or domain changed since are summed again, so a
        cycle after one binding costs two comparisons, not a pass over every node. Do not change the
        array returned."""
        codes, table = self.topology(topology_key)
        size = len(table)
        now = self._log_base + len(self._log)
        entry = self._sums.get((key, topology_key))
        if entry is None or len(entry[0]) != len(values):
            self._sums[(key, topology_key)] = (
                values.copy(),
                codes.copy(),
                per_domain(codes, values, size),
                now,
            )
            while len(self._sums) > TRANSIENT_COLUMNS:
                self._sums.popitem(last=False)
            return self._sums[(key, topology_key)][2]
        self._sums.move_to_end((key, topology_key))
        old_values, old_codes, sums, position = entry
        if position == now and len(sums) >= size:
            return sums
        rows = self._written_since(position)
        if rows is None:
            changed = np.flatnonzero((values != old_values) | (codes != old_codes))
        else:
            changed = np.asarray(
                [
                    i
                    for i in rows
                    if i < len(values) and (values[i] != old_values[i] or codes[i] != old_codes[i])
                ],
                dtype=np.int64,
            )
        if len(changed) or len(sums) < size:
            sums = widened(sums, size)  # a new array: earlier answers stay as they were
            gone, came = old_codes[changed], codes[changed]
            np.subtract.at(sums, gone[gone >= 0], old_values[changed][gone >= 0])
            np.add.at(sums, came[came >= 0], values[changed][came >= 0])
            old_values[changed], old_codes[changed] = values[changed], codes[changed]
        self._sums[(key, topology_key)] = (old_values, old_codes, sums, now)
        return sums

    def refresh_affinity_lists(self) -> None:
        if self._affinity_dirty:
            self.with_affinity = [ni for ni in self.infos if ni.pods_with_affinity]
            self.with_required_anti_affinity = [
                ni for ni in self.infos if ni.pods_with_required_anti_affinity
            ]
            self._affinity_dirty = False

    # ---- writing (the cache, between cycles) ------------------------------------------------------

    def set(self, info: NodeInfo) -> None:
        """Add or replace the row of ``info.name``."""
        self._held.pop(info.name, None)  # the row's own NodeInfo now, not an overlay any more
        i = self.index.get(info.name)
        new_node, written = True, None
        if i is None:
            i = len(self.infos)
            self._ensure(i + 1)
            self.infos.append(info)
            self.index[info.name] = i
        else:
            prev = self.infos[i]
            new_node, written = prev.node is not info.node, prev.allocatable
            self.infos[i] = info
        info.index = i
        if new_node:
            self._node_stamp[i] = self._next_stamp
        self._write_row(i, info, written)
        self._affinity_dirty = True

    def overlay(self, info: NodeInfo) -> None:
        """For one cycle: the row of ``info.name`` is ``info`` (a plugin's changed copy, as the room a
        reservation holds given back to its owner) until :meth:`put_back`. A row held from the last
        cycle (:meth:`put_back` with ``hold``) that shows ``info`` already is not written again."""
        name = info.name
        i = self.index.get(name)
        if name in self._held:
            self._overlaid[name] = self._held.pop(name)
            if i is not None and self.infos[i] is info:
                return
        else:
            self._overlaid.setdefault(name, None if i is None else self.infos[i])
        self.set(info)

    def put_back(self, *, hold: bool = False) -> None:
        """The rows :meth:`overlay` changed hold what they held before again (the NodeInfos themselves:
        nothing changes them, and the cache's changes since are written after). With ``hold`` they keep
        showing the overlay until :meth:`settle`, so a plugin that overlays the same copy again in the
        next cycle costs no row write; until then only :meth:`underneath` tells what a row holds."""
        self.settle()
        overlaid, self._overlaid = self._overlaid, {}
        self._held = overlaid
        if not hold:
            self.settle()

    def settle(self) -> None:
        """The rows still held from the last cycle and not overlaid again hold their own NodeInfos."""
        held, self._held = self._held, {}
        for name, info in held.items():
            if info is None:
                self.remove(name)
            elif name in self.index:
                self.set(info)

    def keep_overlays(self, names: Collection[str]) -> frozenset[str]:
        """:meth:`overlay` again, in one step, of the copies the rows of ``names`` show from the last
        cycle (held by :meth:`put_back`): for a caller that knows nothing was written to those rows since
        it overlaid them (:meth:`names_written_since`). The names whose rows were not held come back (to
        be overlaid one by one)."""
        held = self._held
        rest = {name: held.pop(name) for name in held.keys() - names}
        missing = frozenset() if len(held) == len(names) else frozenset(names) - held.keys()
        self._overlaid.update(held)
        self._held = rest
        return missing

    @property
    def written(self) -> int:
        """How far the log of written rows goes (a position for :meth:`names_written_since`)."""
        return self._log_base + len(self._log)

    def names_written_since(self, position: int) -> frozenset[str] | None:
        """The nodes whose rows were written (by the cache, an overlay or its end) since :attr:`written`
        was ``position``; ``None`` when that is too long ago to tell. Rows keep their nodes while
        :attr:`layout` is the same."""
        rows = self._written_since(position)
        if rows is None:
            return None
        infos = self.infos
        return frozenset(infos[i].name for i in rows if i < len(infos))

    def underneath(self, name: str) -> NodeInfo | None:
        """The NodeInfo of ``name`` once :meth:`settle` has run (not a held overlay)."""
        return self._held[name] if name in self._held else self.node_info(name)

    def remove(self, name: str) -> None:
        self._held.pop(name, None)
        i = self.index.pop(name, None)
        if i is None:
            return
        self.layout += 1
        last = len(self.infos) - 1
        if i != last:  # the last row moves into the hole
            moved = self.infos[last]
            self.infos[i] = moved
            moved.index = i
            self.index[moved.name] = i
            for arr in (self.allocatable, self.requested, self.non_zero, self._stamp, self._node_stamp):
                arr[i] = arr[last]
            for values, stamps, _ in self._derived.values():
                values[i], stamps[i] = values[last], stamps[last]
            self._log.append(i)
        self.infos.pop()
        self._affinity_dirty = True

    def _write_row(self, i: int, info: NodeInfo, written: Mapping[str, int] | None = None) -> None:
        """``written``: the allocatable the row was written from (a NodeInfo's is never changed in place,
        so the same mapping is not written again: a clone with the pods' accounting changed, as a
        reservation's room restored, differs in requested only)."""
        col, resources = self._col, self.resources
        if not col.keys() >= info.requested.keys() or (
            written is not info.allocatable and not col.keys() >= info.allocatable.keys()
        ):
            for name in (*info.allocatable, *info.requested):
                if name not in col:
                    self._add_column(name)
            written = None
        if written is not info.allocatable:
            self.allocatable[i] = [info.allocatable.get(name, 0) for name in resources]
        self.requested[i] = [info.requested.get(name, 0) for name in resources]
        self.non_zero[i] = (info.non_zero_cpu, info.non_zero_memory)
        self._stamp[i] = self._next_stamp
        self._next_stamp += 1
        self._log.append(i)
        if len(self._log) > 4 * max(len(self.infos), 64):
            drop = len(self._log) // 2
            del self._log[:drop]
            self._log_base += drop

    def _ensure(self, rows: int) -> None:
        if rows <= self._cap:
            return
        cap = max(rows, 2 * self._cap, 64)
        self.allocatable = _grown(self.allocatable, cap)
        self.requested = _grown(self.requested, cap)
        self.non_zero = _grown(self.non_zero, cap)
        self._stamp = _grown(self._stamp, cap)
        self._node_stamp = _grown(self._node_stamp, cap)
        self._cap = cap
        for key in list(self._derived):
            self._grow_derived(key, self._derived[key][0].dtype)

    def _grow_derived(self, key: Hashable, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
        values, stamps, fn = self._derived[key]
        new_values = np.empty((self._cap, *values.shape[1:]), dtype=dtype)
        new_values[: len(values)] = values
        new_stamps = np.zeros(self._cap, dtype=np.int64)
        new_stamps[: len(stamps)] = stamps
        self._derived[key] = (new_values, new_stamps, fn)
        return new_values, new_stamps

    def _add_column(self, resource: str) -> int:
        col = len(self.resources)
        self.resources.append(resource)
        self._col[resource] = col
        pad = np.zeros((self.allocatable.shape[0], 1), dtype=np.int64)
        self.allocatable = np.hstack([self.allocatable, pad])
        self.requested = np.hstack([self.requested, pad.copy()])
        for i, info in enumerate(self.infos):
            self.allocatable[i, col] = info.allocatable.get(resource, 0)
            self.requested[i, col] = info.requested.get(resource, 0)
        return col


def _grown(arr: np.ndarray, rows: int) -> np.ndarray:
    out = np.zeros((rows, *arr.shape[1:]), dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out


def widened(per_domain: np.ndarray, size: int) -> np.ndarray:
    """A copy of ``per_domain`` with at least ``size`` entries (zeros added)."""
    out = np.zeros(max(size, len(per_domain)), dtype=per_domain.dtype)
    out[: len(per_domain)] = per_domain
    return out


def at_codes(per_domain: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """``per_domain[code]`` for each code; 0 where the code names no domain of the array (a node without
    the label, a value unknown to the snapshot, a domain newer than the array)."""
    ok = (codes >= 0) & (codes < len(per_domain))
    out = np.zeros(len(codes), dtype=per_domain.dtype)
    out[ok] = per_domain[codes[ok]]
    return out


def per_domain(codes: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    """The sum of the integer ``weights`` of the nodes in each domain (nodes without one left out), as
    an array over the codes ``0..size-1`` at least."""
    has = codes >= 0
    sums = np.bincount(codes[has], weights=weights[has], minlength=size)
    out: np.ndarray = np.rint(sums).astype(np.int64)
    return out


def snapshot_of(handle: Any) -> Snapshot:
    """The cluster a plugin's PreFilter or PreScore looks at: koord-scheduler's snapshot of the cycle
    (``handle.snapshot()``); a front end without one (the extender, whose NodeInfos carry no pods) gets
    one built now from the handle's nodes and the pods on them."""
    own = getattr(handle, "snapshot", None)
    snap = own() if callable(own) else None
    if isinstance(snap, Snapshot):
        return snap
    snap = Snapshot()
    for ni in handle.node_infos():
        if ni.node is None:
            continue
        info = ni.clone()
        if not ni.pods:
            for pod in handle.pods_on_node(ni.name):
                info.add_pod(PodInfo(pod))
        snap.set(info)
    return snap


NAME_COLUMN = "framework/name"


def _name(info: NodeInfo) -> str:
    return info.name


class NodeSet(Sequence[NodeInfo]):
    """The nodes one extension point is asked about, as batch plugins receive them: NodeInfos that also
    know their rows in the snapshot's arrays (``snapshot.requested[nodes.rows]``). ``rows`` is ``None``
    when some node is not in the snapshot (the extender may be asked about a node its cache does not know
    yet); a plugin then answers node by node."""

    __slots__ = ("_infos", "rows", "snapshot")

    def __init__(
        self, snapshot: Snapshot | None, rows: np.ndarray | None, infos: Sequence[NodeInfo] | None = None
    ) -> None:
        self.snapshot = snapshot
        self.rows = rows
        self._infos = list(infos) if infos is not None else None

    @classmethod
    def of(cls, snapshot: Snapshot | None, infos: Sequence[NodeInfo]) -> NodeSet:
        """The given NodeInfos; with rows when every one is the snapshot's own."""
        if snapshot is not None and all(
            0 <= ni.index < len(snapshot) and snapshot.infos[ni.index] is ni for ni in infos
        ):
            return cls(
                snapshot, np.fromiter((ni.index for ni in infos), dtype=np.int64, count=len(infos)), infos
            )
        return cls(snapshot, None, infos)

    @property
    def infos(self) -> list[NodeInfo]:
        if self._infos is None:
            assert self.snapshot is not None and self.rows is not None
            every = self.snapshot.infos
            self._infos = [every[i] for i in self.rows.tolist()]
        return self._infos

    def info(self, i: int) -> NodeInfo:
        """The ``i``-th NodeInfo, without building the whole list."""
        if self._infos is not None:
            return self._infos[i]
        assert self.snapshot is not None and self.rows is not None
        return self.snapshot.infos[int(self.rows[i])]

    @property
    def names(self) -> list[str]:
        col = self.column(NAME_COLUMN, _name, of_node=True)
        if col is not None:  # thousands of names without a Python loop
            names: list[str] = col.tolist()
            return names
        return [ni.name for ni in self.infos]

    def names_at(self, positions: Sequence[int] | np.ndarray) -> list[str]:
        """The names of the nodes at ``positions`` (a few of many, without building every NodeInfo)."""
        if self.rows is not None and self.snapshot is not None:
            every = self.snapshot.derived(NAME_COLUMN, _name, of_node=True)
            names: list[str] = np.take(every, np.take(self.rows, positions)).tolist()
            return names
        infos = self.infos
        return [infos[i].name for i in positions]

    def mask(self, keep: Callable[[NodeInfo], bool]) -> np.ndarray:
        """``keep(node_info)`` for every node, as a boolean array (the node-by-node fallback)."""
        return np.fromiter((keep(ni) for ni in self.infos), dtype=bool, count=len(self))

    def column(
        self, key: str, fn: Callable[[NodeInfo], Any], dtype: Any = object, *, of_node: bool = False
    ) -> np.ndarray | None:
        """The snapshot's derived column ``key`` (see :meth:`Snapshot.derived`) for these nodes;
        ``None`` when they have no rows (answer node by node then)."""
        if self.rows is None or self.snapshot is None:
            return None
        values: np.ndarray = np.take(
            self.snapshot.derived(key, fn, dtype, of_node=of_node), self.rows, axis=0
        )
        return values

    def subset(self, keep: np.ndarray) -> NodeSet:
        """The nodes where the boolean array ``keep`` is true, in order."""
        infos = (
            None
            if self._infos is None
            else [ni for ni, k in zip(self._infos, keep.tolist(), strict=True) if k]
        )
        rows = None if self.rows is None else self.rows[keep]
        if rows is None and infos is None:
            raise ValueError("empty NodeSet")
        return NodeSet(self.snapshot, rows, infos)

    def __len__(self) -> int:
        return len(self.rows) if self.rows is not None else len(self.infos)

    @overload
    def __getitem__(self, i: int) -> NodeInfo: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[NodeInfo]: ...

    def __getitem__(self, i: int | slice) -> NodeInfo | Sequence[NodeInfo]:
        return self.infos[i]

    def __iter__(self) -> Iterator[NodeInfo]:
        return iter(self.infos)

    def __repr__(self) -> str:
        return f"NodeSet({len(self)} nodes)"
