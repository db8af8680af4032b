"""koord-descheduler: Koordinator's descheduler framework with LowNodeLoad, on the Eviction API.

``framework`` is the plugin contract and runner; ``plugins`` the built-in Deschedule/Balance plugins
(their table is ``plugins.BUILTIN``); ``evictor`` the default Evict and Filter plugin
(``MigrationController``: filters, limits, the Eviction API); ``config`` the DeschedulerConfiguration;
``informers`` the shared caches; ``app`` the rounds under leader election; ``cli`` the command.
Nothing here imports the node side.
"""
