"""LowNodeLoad: args (:mod:`.args`), anomaly detectors (:mod:`.anomaly`), usage, thresholds and classes
(:mod:`.usage`), eviction order (:mod:`.sorter`), the balancing passes (:mod:`.balance`) and the plugin
(:mod:`.plugin`)."""

from koord.descheduler.plugins.lownodeload.plugin import NAME, LowNodeLoad

__all__ = ["NAME", "LowNodeLoad"]
