"""PodTopologySpread (kube-scheduler's ``podtopologyspread``): a pod's ``topologySpreadConstraints`` keep
the pods a selector matches spread over topology domains (zones, nodes...). DoNotSchedule constraints
filter (``maxSkew``, ``minDomains``, the node inclusion policies ``nodeAffinityPolicy`` (default Honor)
and ``nodeTaintsPolicy`` (default Ignore), ``matchLabelKeys``); ScheduleAnyway constraints score. Args
``defaultingType`` (System, the default, or List) and ``defaultConstraints``; score weight 2 in the
default profile, as kube-scheduler's.

Default constraints (decided here). kube-scheduler gives a pod without constraints of its own the
default ones, counting the pods that the Services, ReplicationControllers, ReplicaSets and StatefulSets
selecting the pod select. koord-scheduler does not watch those objects; it counts instead the pods of
the pod's controller, when that controller is a ReplicaSet, ReplicationController or StatefulSet (its
``ownerReferences`` entry with ``controller: true``): for the pods of a Deployment or StatefulSet that
is what kube-scheduler's selector matches. A pod only a Service selects, or without such a controller,
gets no default constraints. This holds for both ``System`` (hostname maxSkew 3, zone maxSkew 5,
ScheduleAnyway, scoring only) and ``List``.

``matchLabelKeys`` is merged into the selector here, as kube-scheduler does; a kube-apiserver that
already merged it into ``labelSelector`` gives the same requirement twice, which selects the same pods.
"""

from koord.scheduler.plugins.podtopologyspread.args import NAME
from koord.scheduler.plugins.podtopologyspread.plugin import PodTopologySpread

__all__ = ["NAME", "PodTopologySpread"]
