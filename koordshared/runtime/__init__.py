"""The runtime every process shares (the agent and each cluster process): threads and the one stop Event
(``lifecycle``, ``eventbus``), the HTTP endpoint (``httpserver``, ``httpconn``, ``httpwire``, ``httpaccess``),
klog-like ``logs``, the one ``errors`` tree, ``configfile``, ``flags`` and ``pluginregistry``.

Nothing here knows a process: it imports the standard library and third-party libraries only.
"""
