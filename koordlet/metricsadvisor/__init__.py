"""Metrics advisor: collectors (node, pod, container, system, BE, PSI, host apps) feeding the cache."""
