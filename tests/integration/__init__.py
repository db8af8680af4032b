"""Integration tests on the real kernel: cgroups, processes, the agent as a process, Prometheus."""
