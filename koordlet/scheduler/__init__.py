"""Scheduler side: a load-aware scheduler extender reading NodeMetric."""
