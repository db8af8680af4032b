"""Hook answers as writes: a :class:`~koordlet.runtimehooks.protocol.Resources` becomes cgroup updates
(Koordinator's resource names, the executor maps them to the v2 files) and process writes.

Which answer field is which file: ``cpuset`` -> ``cpuset.cpus``, ``cfs_quota`` -> ``cpu.cfs_quota_us``
(``cpu.max``), ``cpu_shares`` -> ``cpu.shares`` (``cpu.weight``), ``memory_limit`` ->
``memory.limit_in_bytes`` (``memory.max``), ``bvt_warp_ns`` -> ``cpu.bvt_warp_ns``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from koordlet import api
from koordlet.runtimehooks.protocol import Resources

FILES = (
    ("cpuset", "cpuset.cpus"),
    ("cfs_quota", "cpu.cfs_quota_us"),
    ("cpu_shares", "cpu.shares"),
    ("memory_limit", "memory.limit_in_bytes"),
    ("bvt_warp_ns", "cpu.bvt_warp_ns"),
)
"""Answer field -> Koordinator's resource name."""


@dataclass(frozen=True, slots=True)
class Update:
    level: int
    """0 kube-QoS tier, 1 pod, 2 container: the executor's leveled order."""
    update: api.CgroupUpdate


def cgroup_updates(
    cgroup_dir: str, answer: Resources, owner: str, level: int, reason: str, *, cacheable: bool = True
) -> list[Update]:
    out = []
    for name, resource in FILES:
        value = getattr(answer, name)
        if value is not None:
            u = api.CgroupUpdate(resource, cgroup_dir, str(value), owner, reason, cacheable=cacheable)
            out.append(Update(level, u))
    return out


class ProcessWriter(Protocol):
    """The executor's writes to a cgroup's processes (``resourceexecutor.procwrites``)."""

    def set_oom_score_adj(
        self, cgroup_dir: str, value: int, *, owner: str, reason: str = ""
    ) -> api.UpdateResult: ...

    def share_core_sched_cookie(
        self, group: str, cgroup_dirs: Sequence[str], *, owner: str, reason: str = ""
    ) -> api.UpdateResult: ...
