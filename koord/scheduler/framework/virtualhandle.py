"""What koord-scheduler's handle offers a plugin that schedules things that are not pods (Koordinator's
Reservation: its reserve pods) and gives a pod room held for it: pods that exist only in the scheduler,
and a cycle's changed copy of a node. Part of :class:`~koord.scheduler.framework.interface.SchedulerHandle`.
"""

from __future__ import annotations

from typing import Protocol

from koord.scheduler.framework.types import NodeInfo, Obj


class VirtualPodHandle(Protocol):
    def add_virtual_pod(self, pod: Obj) -> None:
        """A pod that exists only in the scheduler (a Reservation's reserve pod): without
        ``spec.nodeName`` it is queued and scheduled like a pod; with one it holds its room on that node as
        a bound pod does. Its failures are not reported on it (an error handler tells its owner)."""

    def update_virtual_pod(self, old: Obj, new: Obj) -> None: ...

    def delete_virtual_pod(self, pod: Obj) -> None: ...

    def replace_node_info(self, info: NodeInfo) -> None:
        """From PreFilter on, for this cycle only: the snapshot's row of ``info.name`` is ``info`` (a
        changed clone of it); the cache's comes back for the next cycle (Koordinator's ``InvalidNodeInfo``
        after restoring reserved resources in the snapshot)."""
