"""Runtime hooks (Koordinator's ``pkg/koordlet/runtimehooks``): the cgroup values a pod's QoS calls for
that the kubelet does not set (batch resources as limits, bound cpusets and share pools, group identity,
core scheduling, ``oom_score_adj``), applied by a reconciler and guarded against out-of-band changes.

``protocol`` is the transport-independent hook contract, one module per hook, ``reconciler`` and ``guard``
the transport without NRI, ``service`` the agent component. How it works and how an NRI transport fits:
``docs/runtimehooks.md``.
"""
