"""The cluster-side plugin author's kit: object builders (:mod:`.objects`: nodes, pods, NodeMetrics), a
fake clock, and the in-memory caches every cluster process can be fed with
(:class:`~koordshared.kube.memstore.MemoryStore`, :class:`~koordshared.kube.informers.MemoryInformerSet`).

Each framework adds a harness that runs plugins as its process would, over these caches:
:mod:`koord.scheduler.testing` and :mod:`koord.descheduler.testing`. Nothing of the processes imports a
kit (checked by import-linter).
"""

from koordshared.kube.informers import MemoryInformerSet
from koordshared.kube.memstore import MemoryStore
from koordshared.testing.clock import FakeClock
from koordshared.testing.objects import node, node_metric, pod, usage

__all__ = ["FakeClock", "MemoryInformerSet", "MemoryStore", "node", "node_metric", "pod", "usage"]
