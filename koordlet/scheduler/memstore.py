"""The extender's in-memory store is the cluster layer's :class:`~koordlet.cluster.memstore.MemoryStore`
(kept importable here for the extender's tests, benchmark and plugin authors)."""

from koordlet.cluster.memstore import MemoryStore

__all__ = ["MemoryStore"]
