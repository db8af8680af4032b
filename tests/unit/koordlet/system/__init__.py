"""Tests of koordlet.system: cgroups, paths, procfs, topology, resctrl, the host reader."""
