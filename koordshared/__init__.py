"""koordshared: what every process of the system stands on.

``runtime`` (threads and the stop Event, the HTTP endpoint, logs, errors, config files, flags, plugin
loading) at the bottom; ``apis`` (Koordinator's API types, stdlib only) and ``kube`` (the Kubernetes client
layer: informers, leader election, work queue, Events, the cluster-process scaffolding) above it; ``testing``
(the test kit the plugin kits share) on top. The node agent (``koordlet``) and the cluster processes
(``koord``) both import it; it imports neither. See ``docs/architecture.md``.
"""

__version__ = "0.1.0"
"""The distribution's version, which every process reports (``--version``, user agents, build info)."""
