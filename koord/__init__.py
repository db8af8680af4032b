"""koord: the cluster processes, Koordinator's koord-* binaries.

``manager`` (koord-manager), ``scheduler`` (koord-scheduler and its kube-scheduler extender front end,
koord-scheduler-extender) and ``descheduler`` (koord-descheduler). They stand on the shared layer,
``koordshared``, as the node agent (``koordlet``) does; see ``docs/architecture.md``.
"""
