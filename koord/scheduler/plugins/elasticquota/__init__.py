"""ElasticQuota: Koordinator's elastic quotas (min, max, a tree of quotas lending and borrowing).

``args`` (fields, defaults, validation), ``runtime`` (the pure runtime-quota calculation), ``quotas``
(quota objects, the built-in quotas, which quota a pod runs in), ``ledger`` (every quota's requests, used
and figures, with each pod as it counts), ``plugin`` (the extension points), ``preempt``
(preemption inside a quota), ``status`` and ``revoke`` (the controllers), ``units`` (quantities as
Koordinator prints them).
"""

from koord.scheduler.plugins.elasticquota.plugin import NAME, ElasticQuota

__all__ = ["NAME", "ElasticQuota"]
