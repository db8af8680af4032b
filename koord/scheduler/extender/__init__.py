"""``koord-scheduler-extender``: kube-scheduler's HTTP extender as a second front end on the scheduling
framework (the plugins are the same objects koord-scheduler runs, over the same cache and snapshot).

``verbs`` answers ``/filter``, ``/prioritize`` and ``/bind`` in kube-scheduler's terms, ``wire`` the JSON
shapes, ``handle`` the informers into koord-scheduler's cache and the plugins' view of it, ``binder`` the
API binding, ``server`` HTTP, ``app`` and ``cli`` the process.
"""
