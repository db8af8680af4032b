"""QoS manager: the plugin host (discovery, flags, feature gates, setup/run/shutdown) and the evictor."""
