"""SchedulingHint: honour the scheduling-hint annotation (Koordinator's
``pkg/scheduler/plugins/schedulinghint``, v1.8 semantics).

``args`` (``maxHintNodes``), ``plugin`` (BeforePreFilter, PreFilter, PreferNodes).
"""

from koord.scheduler.plugins.schedulinghint.plugin import NAME, SchedulingHint

__all__ = ["NAME", "SchedulingHint"]
