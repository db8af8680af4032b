"""The scheduler side: ``koord-scheduler`` (the scheduling framework run as a second scheduler beside
kube-scheduler) and ``koord-scheduler-extender`` (the same plugins behind kube-scheduler's HTTP extender).

``framework/`` is the plugin contract and runtime (no API access); ``plugins/`` the built-ins; ``cache/``
and ``queue/`` kube-scheduler's cache and scheduling queue; ``core/`` the scheduler itself (cycles,
binding, failures, informer handlers, metrics); ``config``/``app``/``cli`` the koord-scheduler process;
``extender/`` the extender front end.
"""
