"""The scheduler-plugin contract: statuses, cycle state, the handle and one Protocol per extension point
(kube-scheduler's ``framework/interface.go``, in Python).

A plugin is any object with a ``name`` and one or more of the methods below; the framework calls only
the ones it has, at the extension points the profile enables it for. Pods and nodes are the API's JSON
as plain mappings, shared with the caches: read them, never change them (a PreBind plugin that wants to
change the pod says so through :meth:`Handle.patch_pod`, which merges every plugin's change into one
PATCH). ``state.pod_info`` is the :class:`PodInfo` of the pod being scheduled.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, overload, runtime_checkable

from koord.scheduler.framework.events import ClusterEventWithHint
from koord.scheduler.framework.snapshot import NodeSet, Snapshot
from koord.scheduler.framework.types import NodeInfo, Obj, PodInfo, PostFilterResult, PreFilterResult
from koordshared.apis.meta.groups import Resource

if TYPE_CHECKING:
    import numpy as np

MAX_NODE_SCORE = 100
"""A Score plugin answers 0..100 per node (after NormalizeScore), as in kube-scheduler."""
MIN_NODE_SCORE = 0
MAX_EXTENDER_PRIORITY = 10
"""kube-scheduler's extender contract: ``/prioritize`` answers 0..10 per node."""
MAX_PERMIT_WAIT = 15 * 60.0
"""kube-scheduler caps the time a Permit plugin may hold a pod (``maxTimeout``, 15 minutes)."""


class Code(enum.IntEnum):
    """kube-scheduler's status codes."""

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6


@dataclass(frozen=True, slots=True)
class Status:
    """The outcome of one plugin call; plugins return ``None`` for success (Go's ``nil``).

    ``UNSCHEDULABLE``: this node (or, from PreFilter, every node) cannot take the pod now, preemption may
    help; ``UNSCHEDULABLE_AND_UNRESOLVABLE``: it cannot, whatever is removed; ``ERROR``: the plugin
    failed (the pod is retried after a backoff); ``SKIP`` from PreFilter/PreScore skips that plugin's
    Filter/Score for this pod, from Bind lets the next Bind plugin bind; ``WAIT`` from Permit holds the
    pod; ``PENDING``: the pod waits for something outside the scheduler (not an attempt failure).
    """

    code: Code
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    @property
    def is_success(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def is_rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    def with_plugin(self, plugin: str) -> Status:
        return self if self.plugin == plugin else Status(self.code, self.reasons, plugin)

    @classmethod
    def unschedulable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE, reasons)

    @classmethod
    def unresolvable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)

    @classmethod
    def error(cls, *reasons: str) -> Status:
        return cls(Code.ERROR, reasons)

    @classmethod
    def wait(cls, *reasons: str) -> Status:
        return cls(Code.WAIT, reasons)

    @classmethod
    def pending(cls, *reasons: str) -> Status:
        return cls(Code.PENDING, reasons)


SKIP = Status(Code.SKIP)


class CycleState:
    """Data plugins share across the phases of one pod's scheduling attempt. ``pod_info`` is the pod
    being scheduled; ``skip_filter``/``skip_score`` the plugins a PreFilter/PreScore SKIP took out."""

    __slots__ = ("_data", "pod_info", "record_plugin_metrics", "skip_filter", "skip_score")

    def __init__(self, pod_info: PodInfo | None = None) -> None:
        self._data: dict[str, Any] = {}
        self.pod_info = pod_info
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()
        self.record_plugin_metrics = True
        """Whether this attempt's plugin calls are timed (kube-scheduler's ``ShouldRecordPluginMetrics``:
        a sample of the cycles)."""

    def read(self, key: str) -> Any:
        """The value written under ``key``; ``KeyError`` when there is none (Go's ``ErrNotFound``)."""
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clone(self) -> CycleState:
        """A shallow copy: values are shared, so store immutable values (or copy them yourself). A
        plugin whose value changes after PreFilter (preemption's what-if runs) provides ``clone()`` on
        it and the copy gets a clone of the value."""
        out = CycleState(self.pod_info)
        out.record_plugin_metrics = self.record_plugin_metrics
        out._data = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in self._data.items()}
        out.skip_filter, out.skip_score = set(self.skip_filter), set(self.skip_score)
        return out


ObjHandler = Callable[[Obj], None]
UpdateHandler = Callable[[Obj, Obj], None]


class Store(Protocol):
    """A cache of one resource (an informer, or an in-memory store in tests)."""

    def get(self, key: str) -> Obj | None: ...

    def objects(self) -> list[Obj]: ...

    def by_index(self, index: str, value: str) -> list[Obj]: ...

    def add_handler(self, handler: Any) -> None:
        """Be told of changes (a :class:`koordshared.kube.informer.EventHandler`; replays cached objects)."""


@dataclass(frozen=True, slots=True)
class StoreHandler:
    """``on_add(obj)``, ``on_update(old, new)`` (also on a resync: ``old is new``), ``on_delete(obj)``."""

    on_add: ObjHandler | None = None
    on_update: UpdateHandler | None = None
    on_delete: ObjHandler | None = None


class WaitingPod(Protocol):
    """A pod held by Permit plugins (kube-scheduler's ``WaitingPod``)."""

    @property
    def pod(self) -> Obj: ...

    @property
    def node_name(self) -> str: ...

    def pending_plugins(self) -> list[str]: ...

    def allow(self, plugin: str) -> None:
        """``plugin`` lets the pod go; it binds once every plugin that made it wait has allowed it."""

    def reject(self, plugin: str, message: str) -> None:
        """The pod does not bind: it is unreserved and returns to the queue."""


class Handle(Protocol):
    """What a plugin gets at construction: read-only views of the cluster (the snapshot of the current
    cycle and the informer caches), change notifications, the clock, the API client, waiting pods.
    Handlers run on the cache's thread, one at a time; keep them quick."""

    def node_info(self, name: str) -> NodeInfo | None: ...

    def node_infos(self) -> Sequence[NodeInfo]: ...

    def get_pod(self, namespace: str, name: str) -> Obj | None: ...

    def pods_on_node(self, node_name: str) -> list[Obj]: ...

    def node_metric(self, node_name: str) -> Obj | None: ...

    def on_pods(
        self,
        on_add: ObjHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: ObjHandler | None = None,
    ) -> None:
        """Be told of pod changes; pods already cached are replayed as adds."""

    def on_node_metrics(
        self,
        on_add: ObjHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: ObjHandler | None = None,
    ) -> None: ...

    def now(self) -> float:
        """Wall-clock seconds (injected, so tests control expiry)."""


SCHEDULING = "Scheduling"
"""The action of an Event about scheduling a pod (kube-scheduler's FailedScheduling); Binding is the
Scheduled Event's, Preempting the Preempted one's."""


class EventHandle(Protocol):
    """Tell users something: an Event, as kube-scheduler's ``EventRecorder().Eventf`` writes it."""

    def event(
        self,
        obj: Obj,
        type_: str,
        reason: str,
        message: str,
        *,
        action: str = SCHEDULING,
        related: Obj | None = None,
    ) -> None:
        """Record an Event regarding ``obj`` (a pod unless it names its kind; asynchronously, never
        blocking the cycle): ``action`` is what the scheduler was doing (``Scheduling``, ``Binding``,
        ``Preempting``), ``related`` a second object involved (the preemptor of a preempted pod)."""


class ObjectHandle(Protocol):
    """Writes for a plugin's controllers (an ElasticQuota's figures, a PodGroup's or a Reservation's
    status, the over-use revoke): create, merge-patch, delete an object, evict a pod."""

    def ensure_object(self, resource: Resource, obj: Obj) -> Status | None:
        """Create ``obj`` unless it exists; an error status when the API refuses."""

    def patch_object(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        subresource: str = "",
    ) -> Status | None:
        """A JSON merge patch of the object or of its ``subresource`` (``status``; ``null`` removes a key;
        a ``metadata.resourceVersion`` in the patch makes it conditional)."""

    def delete_object(self, resource: Resource, namespace: str, name: str) -> Status | None:
        """Delete the object; one gone already is no error."""

    def evict_pod(self, pod: Obj) -> Status | None:
        """Evict the pod through the Eviction API (PodDisruptionBudgets apply); one gone already is no
        error."""


class PreemptionHandle(Protocol):
    """For a plugin that simulates the cycle and acts on it, as DefaultPreemption does (kube-scheduler's
    plugins reach these through the framework itself): filters over what-if nodes, the PreFilter
    extensions, the nominated pods, preemption's writes, the queue and the metrics."""

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


class VirtualPodHandle(Protocol):
    """For a plugin that schedules things that are not pods (a Reservation's reserve pods): pods that
    exist only in the scheduler, and a cycle's changed copy of a node."""

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


class SchedulerHandle(Handle, PreemptionHandle, ObjectHandle, VirtualPodHandle, EventHandle, Protocol):
    """The handle koord-scheduler gives (the extender front end gives the plain :class:`Handle`)."""

    @property
    def client(self) -> Any:
        """The API client, for :func:`koordshared.kube.client.request` (the typed API classes take
        :func:`~koordshared.kube.client.official_client` of it); ``None`` in tests."""

    def snapshot(self) -> Snapshot:
        """The cluster as the current cycle sees it (nodes in row order, their arrays and derived
        columns); :func:`~koord.scheduler.framework.snapshot.snapshot_of` also serves front ends
        without one."""

    def store(self, name: str) -> Store | None:
        """A cache the scheduler keeps by name (``pods``, ``nodes``, ``nodemetrics``, and those plugins
        asked for with :meth:`watch`); ``None`` when it keeps none of that name."""

    def watch(
        self,
        name: str,
        resource: Resource,
        *,
        field_selector: str = "",
        label_selector: str = "",
        namespace: str = "",
    ) -> Store:
        """A cache of ``resource`` (``koordshared.apis.meta.groups``) called ``name``, shared by every plugin
        that
        asks for the same name; ask in the factory, so the cache syncs before the first cycle."""

    def get_waiting_pod(self, uid: str) -> WaitingPod | None: ...

    def iterate_waiting_pods(self, fn: Callable[[WaitingPod], None]) -> None: ...

    def reject_waiting_pod(self, uid: str, plugin: str, message: str) -> bool: ...

    def patch_pod(self, state: CycleState, patch: Mapping[str, Any]) -> None:
        """PreBind only: merge ``patch`` (a JSON merge patch of metadata labels/annotations) into the
        one PATCH DefaultPreBind sends for the pod before Bind."""

    def apply_patch(self, state: CycleState, pod: Obj) -> Status | None:
        """Send the merged PATCH now (DefaultPreBind); the scheduler sends what is left after PreBind."""

    def bind_pod(self, pod: Obj, node: str) -> Status | None:
        """``POST pods/<name>/binding`` (DefaultBinder); an error status when the API refuses."""

    def register_error_handler_filters(
        self, pre: Callable[[Obj, Any], bool] | None, post: Callable[[Obj, Any], bool] | None
    ) -> None:
        """``pre(pod, why)`` returning True takes over a scheduling failure; ``post`` runs after."""

    def register_forget_pod_handler(self, handler: Callable[[Obj], None]) -> None:
        """Be told when an assumed pod is forgotten (its binding failed or was given up)."""


@runtime_checkable
class Plugin(Protocol):
    name: str


class QueueSortPlugin(Plugin, Protocol):
    def less(self, a: Any, b: Any) -> bool:
        """Whether queued pod ``a`` (a :class:`~koord.scheduler.queue.QueuedPodInfo`) goes before ``b``."""


class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: Obj) -> Status | None:
        """``None``: the pod may be scheduled; a Status keeps it out of the active queue (gated)."""


class EnqueueExtensions(Plugin, Protocol):
    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        """The cluster events that may make a pod this plugin rejected schedulable, each with an
        optional queueing hint. A rejecting plugin without this is requeued on any event."""


class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: Obj) -> Status | PreFilterResult | None:
        """``None``/a :class:`PreFilterResult` (the only nodes that can fit): go on; ``SKIP``: skip this
        plugin's filter; a rejection fails the pod on every node."""


class PreFilterExtensions(Plugin, Protocol):
    """Optional with PreFilter: keep the cycle state right when preemption removes or adds pods."""

    def add_pod(self, state: CycleState, pod: Obj, to_add: PodInfo, node_info: NodeInfo) -> Status | None: ...

    def remove_pod(
        self, state: CycleState, pod: Obj, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None: ...


class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None: ...


class BatchFilterPlugin(FilterPlugin, Protocol):
    """An optional fast path: ``filter_nodes`` answers for many nodes at once, exactly what ``filter``
    would answer node by node: a sequence of statuses (fastest as a ``CodedVerdicts``: a code per node),
    or a boolean array (true: passes), ``filter`` then asked the reason of a rejected node when needed.
    ``nodes`` is a :class:`NodeSet`: NodeInfos with their rows in the
    snapshot's arrays."""

    def filter_nodes(
        self, state: CycleState, pod: Obj, nodes: NodeSet
    ) -> Sequence[Status | None] | np.ndarray: ...


class FilterReasonsPlugin(BatchFilterPlugin, Protocol):
    """Optional with a boolean ``filter_nodes``: why many rejected nodes failed, at once. A cycle that finds
    a node never asks; one that fails (FailedScheduling, preemption's candidates) would otherwise call
    ``filter`` on every rejected node, a thousand calls on a full cluster."""

    def why_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> CodedVerdicts:
        """What ``filter`` would answer on each of ``nodes`` (every one rejected by ``filter_nodes``)."""
        ...


@dataclass(frozen=True, slots=True)
class CodedVerdicts(Sequence[Status | None]):
    """A batch Filter answer as codes: one small integer per node and the Status each code stands for, so
    a plugin whose verdicts come out of array maths answers thousands of nodes without a list of
    references, and the cycle finds each code's nodes with one comparison. Reads as the sequence of
    statuses it encodes (``verdicts[i]`` is node ``i``'s)."""

    codes: np.ndarray
    """One integer per node, in order: an index into :attr:`statuses`."""
    statuses: Sequence[Status | None]
    """What each code means (None or a success: the node passes)."""

    def __len__(self) -> int:
        return len(self.codes)

    @overload
    def __getitem__(self, i: int) -> Status | None: ...

    @overload
    def __getitem__(self, i: slice) -> list[Status | None]: ...

    def __getitem__(self, i: int | slice) -> Status | list[Status | None] | None:
        if isinstance(i, slice):
            return [self.statuses[c] for c in self.codes[i].tolist()]
        return self.statuses[int(self.codes[i])]


class PostFilterPlugin(Plugin, Protocol):
    def post_filter(
        self, state: CycleState, pod: Obj, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        """Called when no node fits (``statuses``: node -> why). A nominated node in the result means
        the pod is worth a retry there (preemption); the first plugin that succeeds ends PostFilter."""


class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Status | None: ...


class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        """0..100 (or any range that ``normalize_score`` maps into 0..100); raise to fail the call."""


class BatchScorePlugin(ScorePlugin, Protocol):
    """The optional fast path of ``score``: one score per node, in order (a sequence or an array)."""

    def score_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> Sequence[int] | np.ndarray: ...


class NormalizeScorePlugin(Plugin, Protocol):
    def normalize_score(self, state: CycleState, pod: Obj, scores: dict[str, int]) -> Status | None:
        """Rewrite ``scores`` (node name -> score) in place into 0..100."""


class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: Obj, node_name: str) -> Status | None: ...

    def unreserve(self, state: CycleState, pod: Obj, node_name: str) -> None: ...


class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: Obj, node_name: str) -> tuple[Status | None, float]:
        """``(None, _)``: allowed; ``(Status.wait(), seconds)``: hold the pod until every waiting plugin
        allows it or the time is up (capped at :data:`MAX_PERMIT_WAIT`); a rejection unreserves it."""


class PreBindPlugin(Plugin, Protocol):
    def pre_bind(self, state: CycleState, pod: Obj, node_name: str) -> Status | None: ...


class BindPlugin(Plugin, Protocol):
    def bind(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        """Bind the pod; ``SKIP`` leaves it to the next Bind plugin."""


class PostBindPlugin(Plugin, Protocol):
    def post_bind(self, state: CycleState, pod: Obj, node_name: str) -> None: ...


@runtime_checkable
class NodeDebugPlugin(Plugin, Protocol):
    """Optional: what the plugin keeps about a node, shown by ``/debug/nodes/<node>`` and
    ``koord-manager top nodes`` beside the plugin's verdict."""

    def debug_node(self, node_name: str) -> Any: ...


PluginFactory = Callable[[Mapping[str, Any] | None, Handle], Any]
"""``factory(args, handle)``: ``args`` is the profile's ``pluginConfig[].args`` for this plugin (``None``
when absent). Raise :class:`InvalidArgs` (or ``ValueError``) naming the field for bad args."""


EXTENSION_POINTS: Mapping[str, tuple[str, ...]] = {
    "queueSort": ("less",),
    "preEnqueue": ("pre_enqueue",),
    "preFilter": ("pre_filter",),
    "filter": ("filter",),
    "postFilter": ("post_filter",),
    "preScore": ("pre_score",),
    "score": ("score",),
    "reserve": ("reserve", "unreserve"),
    "permit": ("permit",),
    "preBind": ("pre_bind",),
    "bind": ("bind",),
    "postBind": ("post_bind",),
}
"""Profile extension point -> the methods a plugin needs for it (``normalize_score`` rides on score)."""
