"""LoadAwareScheduling: Koordinator's load-aware filter and score over NodeMetric reports.

``args`` (fields, defaults, validation), ``estimator`` (pod estimates, node capacity), ``thresholds``
(args and node annotation), ``assigncache`` (pods placed after the last report), ``plugin`` (the
extension points).
"""

from koord.scheduler.plugins.loadaware.plugin import NAME, LoadAwareScheduling

__all__ = ["NAME", "LoadAwareScheduling"]
