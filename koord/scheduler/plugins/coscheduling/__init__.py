"""Coscheduling: Koordinator's gang scheduling (PodGroups and the lightweight gang annotations).

``args`` (fields, defaults, validation), ``gangspec`` (a gang read from its pod or PodGroup), ``gang`` and
``cache`` (the gang cache the informers feed), ``plugin`` (the extension points), ``messages`` (what users
are told), ``reporter`` and ``controller`` (the controllers it runs: gated-pod reports, PodGroup status,
on the keyed sync of ``keyed``).
"""

from koord.scheduler.plugins.coscheduling.plugin import NAME, Coscheduling

__all__ = ["NAME", "Coscheduling"]
