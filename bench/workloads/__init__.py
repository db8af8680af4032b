"""Cluster shapes the scheduler benchmarks share (built in memory)."""
