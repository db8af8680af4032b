"""Kernel feature probes: does this host offer a cgroup file, PSI, CFS burst?

A missing feature is "unsupported" (the plugin using it stays off), never an error.
"""

from __future__ import annotations

import os

from koordlet.api.errors import ResourceUnsupported, UnsafePath
from koordlet.system.cgroups import CgroupMode, resource_path
from koordlet.system.paths import HostPaths


def supports_resource(paths: HostPaths, mode: CgroupMode, resource: str, cgroup_dir: str = "") -> bool:
    """Whether ``resource``'s file exists at ``cgroup_dir`` (the subsystem root by default).

    On v2 the root cgroup lacks most controller files (``cpu.max`` lives only in children), so a probe
    of the root also looks one level down, in the first child directory that has the file.
    """
    try:
        path = resource_path(paths, mode, resource, cgroup_dir, for_read=True)
    except (ResourceUnsupported, UnsafePath):
        return False
    if path.exists():
        return True
    if mode is CgroupMode.V2 and not cgroup_dir:
        try:
            with os.scandir(path.parent) as entries:
                return any(
                    e.is_dir(follow_symlinks=False) and (path.parent / e.name / path.name).exists()
                    for e in entries
                )
        except FileNotFoundError:
            return False
    return False
