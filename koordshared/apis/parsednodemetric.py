"""A NodeMetric kept with its status parsed (:class:`ParsedNodeMetric`): what koord-scheduler's caches
hold (the informer's ``transform``), still readable as the object.

A reported NodeMetric decodes into a few hundred small dicts per node (every pod's usage, fifteen
aggregated usages, each a ``{resources: {cpu, memory}}`` of strings): about 20 KB a node, 100 MB over
5000 nodes. Parsed into :class:`~koordshared.apis.nodemetric.NodeMetricStatus` it is a third of that, and
LoadAware reads the numbers as they are instead of parsing quantities on every pod event. Any other
reader (a plugin calling ``Handle.node_metric``) still sees a ``Mapping`` in Koordinator's JSON shape:
the status is written back from the parsed view when read (:func:`~koordshared.apis.nodemetric.to_status`),
so fields the schema does not model are not kept and quantities read in canonical form.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from koordshared.apis.nodemetric import NodeMetricStatus, parse_status, to_status

Obj = Mapping[str, Any]


class ParsedNodeMetric(Mapping[str, Any]):
    """Read-only; ``status`` is ``None`` when the object had none (a NodeMetric the agent has not
    reported to yet)."""

    __slots__ = ("_head", "has_node_metric", "status")

    def __init__(self, head: Obj, status: NodeMetricStatus | None, *, has_node_metric: bool) -> None:
        self._head = head
        """Everything but the status (apiVersion, kind, metadata, spec), as decoded."""
        self.status = status
        self.has_node_metric = has_node_metric
        """``status.nodeMetric`` was set: without it the agent "reported nothing yet" (LoadAware tells
        the two apart), which the parsed status alone does not say."""

    def __getitem__(self, key: str) -> Any:
        if key == "status" and self.status is not None:
            status = to_status(self.status)
            if not self.has_node_metric:
                del status["nodeMetric"]
            return status
        return self._head[key]

    def __iter__(self) -> Iterator[str]:
        yield from self._head
        if self.status is not None:
            yield "status"

    def __len__(self) -> int:
        return len(self._head) + (self.status is not None)

    def __repr__(self) -> str:
        return f"ParsedNodeMetric({dict(self)!r})"


def parse_node_metric(obj: Obj) -> ParsedNodeMetric:
    """``obj`` with its status parsed (``obj`` itself when it is parsed already)."""
    if isinstance(obj, ParsedNodeMetric):
        return obj
    head = {k: v for k, v in obj.items() if k != "status"}
    raw = obj.get("status")
    if not isinstance(raw, Mapping):
        return ParsedNodeMetric(head, None, has_node_metric=False)
    return ParsedNodeMetric(
        head, parse_status(raw), has_node_metric=isinstance(raw.get("nodeMetric"), Mapping)
    )
