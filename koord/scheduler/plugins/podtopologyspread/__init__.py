"""PodTopologySpread (kube-scheduler's ``podtopologyspread``): a pod's ``topologySpreadConstraints`` keep
the pods a selector matches spread over topology domains (zones, nodes...). DoNotSchedule constraints
filter (``maxSkew``, ``minDomains``, the node inclusion policies ``nodeAffinityPolicy`` (default Honor)
and ``nodeTaintsPolicy`` (default Ignore), ``matchLabelKeys``); ScheduleAnyway constraints score. Args
``defaultingType`` (System, the default, or List) and ``defaultConstraints``; score weight 2 in the
default profile, as kube-scheduler's. Details: ``docs/modules.md``.
"""

from koord.scheduler.plugins.podtopologyspread.args import NAME
from koord.scheduler.plugins.podtopologyspread.plugin import PodTopologySpread

__all__ = ["NAME", "PodTopologySpread"]
