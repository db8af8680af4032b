"""The scheduler-plugin contract: statuses, cycle state, node infos, the handle and one Protocol per
extension point (kube-scheduler's ``framework/interface.go``, in Python).

A plugin is any object with a ``name`` and one or more of the methods below; the framework calls only
the ones it has, at the extension points the profile enables it for. Objects (pods, nodes, NodeMetrics)
are the API's JSON as plain mappings, shared with the caches: read them, never change them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

Obj = Mapping[str, Any]

MAX_NODE_SCORE = 100
"""A Score plugin answers 0..100 per node (after NormalizeScore), as in kube-scheduler."""
MIN_NODE_SCORE = 0
MAX_EXTENDER_PRIORITY = 10
"""kube-scheduler's extender contract: ``/prioritize`` answers 0..10 per node."""


class Code(enum.IntEnum):
    """kube-scheduler's status codes (``Wait``/``Pending`` have no meaning for an extender)."""

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    SKIP = 5


@dataclass(frozen=True, slots=True)
class Status:
    """The outcome of one plugin call; plugins return ``None`` for success (Go's ``nil``).

    ``UNSCHEDULABLE`` puts the node in ``FailedNodes`` (preemption may still help),
    ``UNSCHEDULABLE_AND_UNRESOLVABLE`` in ``FailedAndUnresolvableNodes``, ``ERROR`` fails the whole call,
    ``SKIP`` from ``pre_filter``/``pre_score`` skips that plugin's filter/score for this pod.
    """

    code: Code
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    @classmethod
    def unschedulable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE, reasons)

    @classmethod
    def unresolvable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)

    @classmethod
    def error(cls, *reasons: str) -> Status:
        return cls(Code.ERROR, reasons)


SKIP = Status(Code.SKIP)


class CycleState:
    """Data plugins share across the phases of one pod's scheduling attempt (filter, prioritize, bind
    reach the extender as separate requests; the extender keeps one state per pod UID between them)."""

    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}

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
        """A shallow copy: values are shared, so store immutable values (or copy them yourself)."""
        out = CycleState()
        out._data = dict(self._data)
        return out


class NodeInfo:
    """One candidate node: ``name``, the Node object (``None`` when the extender's cache does not know
    the node yet) and ``memo``, a per-node dict where plugins keep what they derived from this node
    object (it is replaced together with the object when the node changes)."""

    __slots__ = ("memo", "name", "node")

    def __init__(self, name: str, node: Obj | None) -> None:
        self.name = name
        self.node = node
        self.memo: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"NodeInfo({self.name!r}{'' if self.node is not None else ', unknown'})"


ObjHandler = Callable[[Obj], None]
UpdateHandler = Callable[[Obj, Obj], None]


class Handle(Protocol):
    """What a plugin gets at construction: read-only views of the cluster caches, change notifications
    and the clock. Handlers run on the cache's thread, one at a time; keep them quick."""

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


@runtime_checkable
class Plugin(Protocol):
    name: str


class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None: ...


class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None: ...


class BatchFilterPlugin(FilterPlugin, Protocol):
    """An optional fast path: ``filter_nodes`` answers for many nodes at once, exactly what ``filter``
    would answer node by node (the framework calls it instead of ``filter`` when present). Worth it when
    a plugin can take its per-pod work, locks or clock reads out of the per-node loop."""

    def filter_nodes(
        self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]
    ) -> Sequence[Status | None]: ...


class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Status | None: ...


class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        """0..100 (or any range that ``normalize_score`` maps into 0..100); raise to fail the call."""


class BatchScorePlugin(ScorePlugin, Protocol):
    """The optional fast path of ``score``: one score per node, in order."""

    def score_nodes(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Sequence[int]: ...


class NormalizeScorePlugin(Plugin, Protocol):
    def normalize_score(self, state: CycleState, pod: Obj, scores: dict[str, int]) -> Status | None:
        """Rewrite ``scores`` (node name -> score) in place into 0..100."""


class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: Obj, node_name: str) -> Status | None: ...

    def unreserve(self, state: CycleState, pod: Obj, node_name: str) -> None: ...


@runtime_checkable
class NodeDebugPlugin(Plugin, Protocol):
    """Optional: what the plugin keeps about a node, shown by ``/debug/nodes/<node>`` and
    ``koord-manager top nodes`` beside the plugin's verdict."""

    def debug_node(self, node_name: str) -> Any: ...


PluginFactory = Callable[[Mapping[str, Any] | None, Handle], Any]
"""``factory(args, handle)``: ``args`` is the profile's ``pluginConfig[].args`` for this plugin (``None``
when absent). Raise :class:`InvalidArgs` (or ``ValueError``) naming the field for bad args."""


EXTENSION_POINTS: Mapping[str, tuple[str, ...]] = {
    "preFilter": ("pre_filter",),
    "filter": ("filter",),
    "preScore": ("pre_score",),
    "score": ("score",),
    "reserve": ("reserve", "unreserve"),
}
"""Profile extension point -> the methods a plugin needs for it (``normalize_score`` rides on score)."""
