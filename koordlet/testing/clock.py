"""The fake clock of the plugin kits, defined once in :mod:`koordshared.testing.clock` (shared with the
cluster-side kit) and re-exported here for QoS plugin authors."""

from koordshared.testing.clock import FakeClock

__all__ = ["FakeClock"]
