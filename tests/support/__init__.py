"""Helpers shared by the agent's own tests (the plugin-author kit is ``koordlet.testing``)."""
