"""koordlet: a Python node agent for Kubernetes colocation (Koordinator's koordlet, re-implemented).

Layers, bottom up: ``api`` (plugin contract) → ``system`` (host reads) → ``resourceexecutor`` (host writes)
→ ``metriccache`` → ``metricsadvisor`` / ``statesinformer`` → ``qosmanager`` (plugin host) → ``daemon`` →
``cli``. ``scheduler`` is the slim cluster-side component.
"""

__version__ = "0.1.0"
