"""``koord-scheduler-extender``: kube-scheduler's HTTP extender as a second front end on the scheduling
framework (the plugins are the same objects koord-scheduler runs).

``verbs`` answers ``/filter``, ``/prioritize`` and ``/bind`` in kube-scheduler's terms, ``wire`` the JSON
shapes, ``handle`` the plugins' view of the caches, ``binder`` the API binding, ``server`` HTTP, ``app`` and
``cli`` the process.
"""
