"""Contract suites: the plugin kit's fakes and the agent's real services held to the same checks."""
