"""The extender's in-memory store is the cluster layer's :class:`~koord.kube.memstore.MemoryStore`
(kept importable here for the extender's tests, benchmark and plugin authors)."""

from koord.kube.memstore import MemoryStore

__all__ = ["MemoryStore"]
