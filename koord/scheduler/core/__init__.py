"""The scheduler proper: the scheduling and binding cycles over the queue, the cache and the profiles
(kube-scheduler's ``schedule_one.go`` and ``scheduler.go``)."""
