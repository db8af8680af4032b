"""Koordinator's elastic-quota vocabulary (its ``apis/extension/elastic_quota.go``): the built-in quota
names, the labels and annotations on ``ElasticQuota`` objects and pods, and how each is read.

An ``ElasticQuota`` (``scheduling.sigs.k8s.io/v1alpha1``) has ``spec.min`` and ``spec.max`` and
``status.used``; the tree is spelled in labels (``parent``, ``is-parent``, ``allow-lent-resource``,
``tree-id``, ``is-root``), the share of spare resources in the ``shared-weight`` annotation, the namespaces
whose pods it takes in the ``namespaces`` annotation. The scheduler writes its figures back as the
``runtime``, ``request``, ``child-request``, ``non-preemptible-request`` and ``non-preemptible-used``
annotations. Pure: stdlib only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from koordshared.apis.core.pod import as_map

ROOT_QUOTA = "koordinator-root-quota"
"""The tree's head: every quota without a parent label hangs under it; it holds no pods."""
SYSTEM_QUOTA = "koordinator-system-quota"
DEFAULT_QUOTA = "koordinator-default-quota"
"""Where a pod goes that no quota claims (by label, name or namespace)."""
BUILT_IN = (ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA)

PREFIX = "quota.scheduling.koordinator.sh"
LABEL_QUOTA_NAME = PREFIX + "/name"
"""On a pod: the quota it runs in."""
LABEL_PARENT = PREFIX + "/parent"
LABEL_IS_PARENT = PREFIX + "/is-parent"
LABEL_ALLOW_LENT_RESOURCE = PREFIX + "/allow-lent-resource"
LABEL_IS_ROOT = PREFIX + "/is-root"
LABEL_TREE_ID = PREFIX + "/tree-id"
LABEL_PREEMPTIBLE = PREFIX + "/preemptible"
"""On a pod: ``"false"`` makes it non-preemptible (it must fit in its quota's min, and is never a victim)."""

ANNOTATION_SHARED_WEIGHT = PREFIX + "/shared-weight"
ANNOTATION_NAMESPACES = PREFIX + "/namespaces"
ANNOTATION_RUNTIME = PREFIX + "/runtime"
ANNOTATION_REQUEST = PREFIX + "/request"
ANNOTATION_CHILD_REQUEST = PREFIX + "/child-request"
ANNOTATION_NON_PREEMPTIBLE_REQUEST = PREFIX + "/non-preemptible-request"
ANNOTATION_NON_PREEMPTIBLE_USED = PREFIX + "/non-preemptible-used"

Obj = Mapping[str, Any]


def labels_of(obj: Obj) -> Mapping[str, Any]:
    return as_map(as_map(obj, "metadata"), "labels")


def annotations_of(obj: Obj) -> Mapping[str, Any]:
    return as_map(as_map(obj, "metadata"), "annotations")


def parent_name(quota: Obj) -> str:
    """The parent label; a quota without one hangs under the root (the root has no parent)."""
    parent = str(labels_of(quota).get(LABEL_PARENT) or "")
    if not parent and str(as_map(quota, "metadata").get("name") or "") != ROOT_QUOTA:
        return ROOT_QUOTA
    return parent


def is_parent(quota: Obj) -> bool:
    return labels_of(quota).get(LABEL_IS_PARENT) == "true"


def allows_lending(quota: Obj) -> bool:
    """Whether the quota lends what it does not use of its min (anything but ``"false"``: yes)."""
    return labels_of(quota).get(LABEL_ALLOW_LENT_RESOURCE) != "false"


def tree_id(quota: Obj) -> str:
    return str(labels_of(quota).get(LABEL_TREE_ID) or "")


def namespaces(quota: Obj) -> tuple[str, ...]:
    """The ``namespaces`` annotation (a JSON list); malformed means none, as Koordinator reads it."""
    raw = annotations_of(quota).get(ANNOTATION_NAMESPACES)
    if not isinstance(raw, str) or not raw:
        return ()
    try:
        value = json.loads(raw)
    except ValueError:
        return ()
    if not isinstance(value, list):
        return ()
    return tuple(str(v) for v in value if isinstance(v, str))


def shared_weight_raw(quota: Obj) -> Mapping[str, Any] | None:
    """The ``shared-weight`` annotation as a ResourceList object, ``None`` when absent or malformed (the
    caller then takes ``spec.max``, as Koordinator does; an all-zero weight counts as absent too)."""
    raw = annotations_of(quota).get(ANNOTATION_SHARED_WEIGHT)
    if not isinstance(raw, str) or not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, Mapping) else None


def pod_quota_label(pod: Obj) -> str:
    return str(labels_of(pod).get(LABEL_QUOTA_NAME) or "")


def is_non_preemptible(pod: Obj) -> bool:
    return labels_of(pod).get(LABEL_PREEMPTIBLE) == "false"
