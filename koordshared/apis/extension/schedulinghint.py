"""Koordinator's scheduling hint (``apis/extension/multi_scheduler.go``): an annotation with which another
component (a job controller, a batch engine) tells the scheduler where a pod must go (``nodeNames``), where to
try first (``preferredNodeNames``, in order), and what individual plugins should honour (``extensions``,
plugin name -> anything; DeviceShare keeps a pod's recorded device allocation when it finds its name there).

Pure: stdlib only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordshared.runtime.errors import InvalidValue

ANNOTATION_SCHEDULING_HINT = "internal.scheduling.koordinator.sh/scheduling-hint"
DEPRECATED_ANNOTATION_SCHEDULING_HINT = "scheduling.koordinator.sh/scheduling-hint"
"""Read when the internal annotation is absent or empty (Koordinator keeps both for one release)."""


@dataclass(frozen=True, slots=True)
class SchedulingHint:
    node_names: tuple[str, ...] = ()
    """The only nodes the pod may go to (empty: any)."""
    preferred_node_names: tuple[str, ...] = ()
    """Nodes to try first, in order: the first one that passes every filter takes the pod."""
    extensions: Mapping[str, Any] = field(default_factory=dict)


def _names(doc: Mapping[str, Any], key: str, annotation: str, text: str) -> tuple[str, ...]:
    value = doc.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidValue(f"annotation {annotation}", text, f"{key} must be a list of node names")
    return tuple(value)


def scheduling_hint(annotations: Mapping[str, Any]) -> SchedulingHint | None:
    """The pod's hint (``None``: it has none); :class:`InvalidValue` naming the annotation when it is not
    the JSON Koordinator decodes (unknown keys are ignored, as Go's decoder does)."""
    for key in (ANNOTATION_SCHEDULING_HINT, DEPRECATED_ANNOTATION_SCHEDULING_HINT):
        text = str(annotations.get(key) or "")
        if not text:
            continue
        try:
            doc = json.loads(text)
        except ValueError as err:
            raise InvalidValue(f"annotation {key}", text, f"not JSON ({err})") from err
        if doc is None:
            return SchedulingHint()
        if not isinstance(doc, Mapping):
            raise InvalidValue(f"annotation {key}", text, "want a JSON object")
        extensions = doc.get("extensions")
        extensions = {} if extensions is None else extensions
        if not isinstance(extensions, Mapping):
            raise InvalidValue(f"annotation {key}", text, "extensions must be an object")
        return SchedulingHint(
            _names(doc, "nodeNames", key, text),
            _names(doc, "preferredNodeNames", key, text),
            dict(extensions),
        )
    return None
