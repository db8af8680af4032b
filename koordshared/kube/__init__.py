"""The small cluster-client layer shared by every cluster process (and, later, the agent's informer).

``client`` (ApiClient construction and error mapping), ``informer`` (the list+watch cache),
``workqueue`` (per-key dedup and rate-limited retries), ``leaderelection`` (Lease-based, judged on a
monotonic clock), ``events`` (an Event recorder) and ``process`` (flags, HTTP probes, signals, graceful
stop). Nothing here imports the node side.
"""
