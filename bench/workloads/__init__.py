"""Scheduling workloads for koord-scheduler's benchmarks, shaped after kube-scheduler's ``scheduler_perf``
test cases (``test/integration/scheduler_perf``): the nodes, the pods placed first and the pods whose
scheduling is measured, as API objects."""
