"""The services a plugin receives: read-only views and the one write path (Protocols).

The agent implements them (states informer, metric cache, host, resource executor, evictor);
``koordlet.testing`` fakes them. A plugin changes the host only through :class:`ResourceWriter` and
removes pods only through :class:`Evictor`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from koordlet.api.metrics import Aggregation
from koordlet.api.netqos import NetQoSSpec
from koordlet.api.types import (
    CgroupUpdate,
    CPUInfo,
    KubeQOSClass,
    NodeInfo,
    NodeSLO,
    PodInfo,
    QueryResult,
    ResctrlUpdate,
    UpdateResult,
)


class MetricReader(Protocol):
    """Read-only view of the metric cache."""

    def query(
        self,
        metric: str,
        *,
        window: float,
        agg: Aggregation = "last",
        labels: Mapping[str, str] | None = None,
    ) -> QueryResult | None:
        """Aggregate ``metric`` over the last ``window`` seconds; ``None`` when there is no sample.

        ``labels`` selects series by Koordinator's property names (``pod_uid``, ``container_id``,
        ``be_allocation``...); a subset of the properties merges every matching series.
        """
        ...


class StatesReader(Protocol):
    """Read-only view of what the states informer knows."""

    def node(self) -> NodeInfo | None: ...

    def pods(self) -> Sequence[PodInfo]: ...

    def node_slo(self) -> NodeSLO: ...

    def has_synced(self) -> bool: ...


class HostReader(Protocol):
    """Facts about the host and read access to cgroups (writes go through :class:`ResourceWriter`)."""

    def cgroup_version(self) -> int:
        """1 or 2 (hybrid hosts with v1 controllers report 1)."""
        ...

    def cpu_topology(self) -> Sequence[CPUInfo]:
        """Online logical CPUs with core/socket/NUMA ids, sorted by CPU id."""
        ...

    def supports(self, resource: str) -> bool:
        """Whether the kernel offers ``resource`` (Koordinator's v1 file name, e.g. ``cpu.cfs_burst_us``)."""
        ...

    def qos_cgroup_dir(self, qos: KubeQOSClass) -> str:
        """The kubepods tier directory (e.g. ``kubepods/besteffort``) relative to a subsystem root."""
        ...

    def read(self, resource: str, cgroup_dir: str) -> str | None:
        """Current value of ``resource`` in ``cgroup_dir``, or ``None`` if the cgroup is gone.

        Raises :class:`ResourceUnsupported` (the kernel lacks the file), :class:`UnsafePath` (a directory
        outside the cgroup root) or :class:`InvalidValue` (unparsable content): all :class:`KoordletError`.
        """
        ...

    def list_cgroups(self, cgroup_dir: str, depth: int) -> Sequence[str]:
        """``cgroup_dir`` and its descendants down to ``depth`` levels, parents before children."""
        ...

    def block_device(self, name: str) -> str:
        """The ``major:minor`` of the disk named ``name`` (``vdb``, ``/dev/vdb``, ``dm-0``, a device-mapper
        name such as ``vg-lv``); a partition gives its whole disk, the unit block throttling acts on.

        Raises :class:`ResourceUnsupported` when this host has no such block device.
        """
        ...

    def resctrl_unsupported(self) -> str | None:
        """``None`` when this host offers resctrl control (L3 cache allocation and memory bandwidth
        allocation, mounted or mountable); otherwise why not, in one log line's worth."""
        ...


class ResourceWriter(Protocol):
    """The resource executor: the only way a plugin changes the host."""

    def update(self, update: CgroupUpdate) -> UpdateResult: ...

    def update_batch(self, updates: Sequence[CgroupUpdate]) -> list[UpdateResult]:
        """Apply in order; a failed or vanished item does not stop the rest."""
        ...

    def leveled_update(self, levels: Sequence[Sequence[CgroupUpdate]]) -> list[UpdateResult]:
        """Levels are ``[qos, pods, containers]``: growth applied parents first, shrink children first."""
        ...

    def release(self, owner: str) -> None:
        """Stop re-applying ``owner``'s values (call from ``shutdown`` after restoring them)."""
        ...

    # Kernel tunables (``/proc/sys``, ``/sys``): koordlet's system config files by name
    # (``min_free_kbytes``, ``watermark_scale_factor``, ``memcg_reap_background``, ``sched_features``...).

    def update_sysctl(self, name: str, value: str, *, owner: str, reason: str = "") -> UpdateResult:
        """Make the tunable ``name`` hold ``value`` (``sched_features``: one flag, ``X`` or ``NO_X``); the
        value found before ``owner``'s first write is kept for :meth:`restore_sysctl`."""
        ...

    def restore_sysctl(self, owner: str, names: Sequence[str] | None = None) -> list[UpdateResult]:
        """Write back what ``owner`` found before its first writes (of ``names`` only, if given) and stop
        re-applying those values."""
        ...

    # resctrl (Intel RDT / AMD PQoS): class-level control groups.

    def ensure_resctrl_group(self, group: str, *, owner: str, reason: str = "") -> UpdateResult:
        """Mount resctrl if it is not, and make ``group``; ``written`` when the group was made now."""
        ...

    def update_resctrl(self, update: ResctrlUpdate) -> UpdateResult:
        """Set the group's L3 ways and memory bandwidth on every cache domain (skipped when unchanged)."""
        ...

    def move_resctrl_tasks(
        self, group: str, tids: Sequence[int], *, owner: str, reason: str = ""
    ) -> UpdateResult:
        """Move the threads ``tids`` not yet in ``group`` into it; threads that exited are ignored."""
        ...

    def remove_resctrl_group(self, group: str, *, owner: str, reason: str = "") -> UpdateResult:
        """Remove ``group``: the kernel moves its threads back to the default group."""
        ...

    # Network QoS (tc): one spec per uplink.

    def apply_network_qos(self, spec: NetQoSSpec, *, owner: str, reason: str = "") -> UpdateResult:
        """Make the uplink's tc state hold ``spec``; only the steps that differ are carried out."""
        ...

    def remove_network_qos(self, uplink: str, *, owner: str, reason: str = "") -> UpdateResult:
        """Remove every qdisc, class, filter and IFB device network QoS put on ``uplink``."""
        ...


class Evictor(Protocol):
    """Evicts pods through the Eviction API or by killing their processes (``--only-evict-by-api``)."""

    def evict(self, pod: PodInfo, reason: str, message: str) -> bool:
        """Evict ``pod``; returns True if it was evicted now or recently (TTL cache)."""
        ...

    def recently_evicted(self, uid: str) -> bool: ...
