"""koordlet: the node agent (Koordinator's koordlet, re-implemented), one of the system's four processes.

Layers, bottom up: ``api`` (the QoS plugin contract) → ``system`` (host reads) → ``resourceexecutor`` (host
writes) → ``metriccache`` → ``prediction`` → ``metricsadvisor`` / ``statesinformer`` → ``qosmanager`` (plugin
host) → ``daemon`` → ``cli``. Below the agent lies the runtime every process shares (``koord.runtime``,
``koord.kube``, ``koord.apis``); the cluster processes live in ``koord``. See ``docs/architecture.md``.
"""

from koord import __version__ as __version__
