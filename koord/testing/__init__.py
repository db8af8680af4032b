"""The cluster-side plugin author's kit: object builders (:mod:`.objects`: nodes, pods, NodeMetrics), a
fake clock, and the in-memory caches every cluster process can be fed with
(:class:`~koord.kube.memstore.MemoryStore`, :class:`~koord.kube.informers.MemoryInformerSet`).

Each framework adds a harness that runs plugins as its process would, over these caches:
:mod:`koord.scheduler.testing` and :mod:`koord.descheduler.testing`. Nothing of the processes imports a
kit (checked by import-linter).
"""

from koord.kube.informers import MemoryInformerSet
from koord.kube.memstore import MemoryStore
from koord.testing.clock import FakeClock
from koord.testing.objects import node, node_metric, pod, usage

__all__ = ["FakeClock", "MemoryInformerSet", "MemoryStore", "node", "node_metric", "pod", "usage"]
