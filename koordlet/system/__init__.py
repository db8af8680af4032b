"""Host access (reads): host paths, cgroup v1/v2 resources and path formatting, procfs, resctrl, PSI.

The only layer that builds host paths; ``native.py`` is the only importer of the cffi module.
"""
