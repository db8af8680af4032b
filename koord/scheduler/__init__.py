"""The scheduler side: ``koord-scheduler-extender``, a kube-scheduler HTTP extender hosting
scheduling-framework plugins, LoadAwareScheduling first.

``framework/`` is the plugin contract and runtime (no API access); ``plugins/`` the built-ins;
``snapshot``/``memstore`` the caches behind the plugins' handle; ``wire`` the extender JSON;
``extender`` the verbs; ``binder`` the API binding; ``server`` HTTP; ``app``/``cli`` the process.
"""
