"""What koord-scheduler's handle offers a plugin that simulates the scheduling cycle and acts on its
outcome, as DefaultPreemption does (kube-scheduler's ``Handle`` is the framework itself, so its plugins
reach these through it): the profile's filters over what-if nodes, the PreFilter extensions that keep the
cycle state right for them, the nominated pods, the writes preemption makes, the queue and the metrics.
Part of :class:`~koord.scheduler.framework.interface.SchedulerHandle`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from koord.scheduler.framework.types import NodeInfo, Obj, PodInfo

if TYPE_CHECKING:
    from koord.scheduler.framework.interface import CycleState, Status


class PreemptionHandle(Protocol):
    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod: Obj, node_info: NodeInfo
    ) -> Status | None:
        """Every Filter plugin of ``pod``'s profile on ``node_info`` (a what-if copy) as the cycle runs
        them: also with the pods nominated to the node ahead of ``pod``. The first rejection, or ``None``."""

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: Obj, to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        """The PreFilter plugins' ``add_pod`` for ``to_add`` now on ``node_info`` (an error if one fails)."""

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: Obj, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        """The PreFilter plugins' ``remove_pod`` for ``to_remove`` taken off ``node_info``."""

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        """The pending pods nominated to the node (kube-scheduler's ``PodNominator``)."""

    def delete_pod(self, pod: Obj) -> Status | None:
        """``DELETE`` the pod (with its UID as precondition); one already gone counts as deleted."""

    def update_pod_status(
        self, pod: Obj, condition: Mapping[str, Any] | None, nominated_node: str | None
    ) -> Status | None:
        """Merge ``condition`` into the pod's conditions and/or set ``status.nominatedNodeName`` (``""``
        clears it); a pod already gone is no error."""

    def activate(self, pods: Sequence[Obj]) -> None:
        """Move these pending pods to the active queue now (kube-scheduler's ``Activate``)."""

    def count_preemption_attempt(self) -> None:
        """``scheduler_preemption_attempts_total`` grows by one."""

    def observe_preemption_victims(self, victims: int) -> None:
        """``scheduler_preemption_victims`` observes a preemption's number of victims."""
