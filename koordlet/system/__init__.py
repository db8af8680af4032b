"""Host access (reads): host paths, cgroup v1/v2 resources and path formatting, procfs, resctrl, PSI.

The only layer that builds host paths; ``native.py`` is the only importer of the cffi module. Modules:
``paths`` (HostPaths), ``cgroups`` (resource table, mode, paths, v1<->v2 values) with ``cgroupvalues``
(validators); ``files`` (the one reader of kernel files); ``podpath`` (kubepods layout, ID validation);
``procfs``, ``cgstats``, ``topology``, ``probes``; ``resctrl``; ``host`` (the ``HostReader``);
``atomicfile``; ``native`` and its helpers for the batched C paths.
"""
