"""The default Evict and Filter plugin, ``MigrationController``: args (:mod:`.args`), static filters
(:mod:`.filters`), limits on evictions under way (:mod:`.limits`) and the plugin on the Eviction API
(:mod:`.plugin`)."""

from koord.descheduler.evictor.plugin import NAME, MigrationController

__all__ = ["NAME", "MigrationController"]
