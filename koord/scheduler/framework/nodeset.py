"""The nodes one extension point is asked about, as batch plugins receive them: a sequence of
:class:`NodeInfo` that also knows each node's row in the snapshot's arrays, so a Filter or Score pass over
thousands of nodes can be a few vector operations (``snapshot.requested[nodes.rows]``...).

``rows`` is ``None`` when some node is not in the snapshot (the extender front end may be asked about a
node its cache does not know yet); a plugin then answers node by node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from koord.scheduler.framework.types import NodeInfo

if TYPE_CHECKING:
    from koord.scheduler.framework.snapshot import Snapshot


class NodeSet(Sequence[NodeInfo]):
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
        return [ni.name for ni in self.infos]

    def mask(self, keep: Callable[[NodeInfo], bool]) -> np.ndarray:
        """``keep(node_info)`` for every node, as a boolean array (the node-by-node fallback)."""
        return np.fromiter((keep(ni) for ni in self.infos), dtype=bool, count=len(self))

    def column(self, key: str, fn: Callable[[NodeInfo], Any], dtype: Any = object) -> np.ndarray | None:
        """The snapshot's derived column ``key`` (see :meth:`Snapshot.derived`) for these nodes;
        ``None`` when they have no rows (answer node by node then)."""
        if self.rows is None or self.snapshot is None:
            return None
        values: np.ndarray = self.snapshot.derived(key, fn, dtype)[self.rows]
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
