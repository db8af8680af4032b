"""Metric cache: typed ring-buffer time series and a key-value store, persisted across restarts."""
