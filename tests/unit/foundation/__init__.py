"""Tests of the foundation: the plugin contract, CLI, configuration, feature gates, lifecycle."""
