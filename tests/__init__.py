"""The agent's test suite: unit tests on fake host trees, integration tests on the real kernel."""
