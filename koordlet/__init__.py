"""koordlet: the node agent (Koordinator's koordlet, re-implemented), one of the system's five processes.

Layers, bottom up: ``api`` (the QoS plugin contract) → ``system`` (host reads) → ``resourceexecutor`` (host
writes) → ``metriccache`` → ``prediction`` → ``metricsadvisor`` / ``statesinformer`` → ``qosmanager`` (plugin
host) → ``daemon`` → ``cli``. Below the agent lies the runtime every process shares (``koordshared.runtime``,
``koordshared.kube``, ``koordshared.apis``); the cluster processes live in ``koord``. See
``docs/architecture.md``.
"""

from koordshared import __version__ as __version__
