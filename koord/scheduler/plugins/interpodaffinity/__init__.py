"""InterPodAffinity (kube-scheduler's ``interpodaffinity``): ``podAffinity`` and ``podAntiAffinity``, required
(Filter) and preferred (Score), against the pods already placed, and the placed pods' required
anti-affinity against the incoming pod. Terms select pods by ``labelSelector`` (with ``matchLabelKeys``
and ``mismatchLabelKeys``) in ``namespaces`` or a ``namespaceSelector``'s namespaces, per topology
domain (``topologyKey``). Score weight 2 in the default profile, as kube-scheduler's.

The expensive plugin of the default profile: each cycle reads per-node columns of the snapshot
(pods matching a term, pods carrying a term), recomputed only for nodes that changed, and sums them
per topology domain as arrays, so a pod without affinity facing pods without anti-affinity costs a
few dictionary lookups.
"""

from koord.scheduler.plugins.interpodaffinity.plugin import InterPodAffinity
from koord.scheduler.plugins.interpodaffinity.terms import NAME

__all__ = ["NAME", "InterPodAffinity"]
