"""Koordinator's gang vocabulary (``apis/extension/coscheduling.go`` and the scheduler-plugins
``PodGroup`` of ``scheduling.sigs.k8s.io/v1alpha1``): how a pod names its gang, the annotations that
describe a gang without a PodGroup, the modes and match policies, the PodGroup phases, and the
annotations the scheduler writes when it binds a gang.

Pure: stdlib only. The Coscheduling plugin parses these; other processes may read them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

POD_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
"""The PodGroup way: the pod's label names a PodGroup object of its namespace."""
LIGHTWEIGHT_NAME_LABEL = "pod-group.scheduling.sigs.k8s.io/name"
"""Deprecated lightweight coscheduling (scheduler-plugins): the gang's name as a label."""
LIGHTWEIGHT_MIN_LABEL = "pod-group.scheduling.sigs.k8s.io/min-available"

GANG_PREFIX = "gang.scheduling.koordinator.sh"
GANG_NAME = f"{GANG_PREFIX}/name"
GANG_MIN_AVAILABLE = f"{GANG_PREFIX}/min-available"
GANG_WAITING_TIME = f"{GANG_PREFIX}/waiting-time"
GANG_TOTAL_NUMBER = f"{GANG_PREFIX}/total-number"
GANG_MODE = f"{GANG_PREFIX}/mode"
GANG_GROUPS = f"{GANG_PREFIX}/groups"
GANG_MATCH_POLICY = f"{GANG_PREFIX}/match-policy"
ALIAS_MATCH_POLICY = "pod-group.scheduling.sigs.k8s.io/match-policy"

BIND_GANG_GROUP_ID = "internal.scheduling.koordinator.sh/bind-gang-group-id"
BIND_GANG_MEMBER_COUNT = "internal.scheduling.koordinator.sh/bind-gang-member-count"
DEPRECATED_BIND_GANG_GROUP_ID = "scheduling.koordinator.sh/bind-gang-group-id"
DEPRECATED_BIND_GANG_MEMBER_COUNT = "scheduling.koordinator.sh/bind-gang-member-count"


class GangMode(enum.StrEnum):
    """What a member's failure does to the members waiting at Permit."""

    STRICT = "Strict"
    NON_STRICT = "NonStrict"


class MatchPolicy(enum.StrEnum):
    """Which members count toward ``min-available`` at Permit."""

    ONLY_WAITING = "only-waiting"
    WAITING_AND_RUNNING = "waiting-and-running"
    ONCE_SATISFIED = "once-satisfied"


class PodGroupPhase(enum.StrEnum):
    PENDING = "Pending"
    PRE_SCHEDULING = "PreScheduling"
    SCHEDULING = "Scheduling"
    SCHEDULED = "Scheduled"
    RUNNING = "Running"
    FINISHED = "Finished"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


def _map(obj: Any, key: str) -> Mapping[str, Any]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def gang_name(pod: Mapping[str, Any]) -> str:
    """The gang a pod belongs to (``GetGangName``): the PodGroup label, else the deprecated lightweight
    label, else the ``gang.scheduling.koordinator.sh/name`` annotation; ``""`` for none."""
    meta = _map(pod, "metadata")
    labels, annotations = _map(meta, "labels"), _map(meta, "annotations")
    return str(
        labels.get(POD_GROUP_LABEL) or labels.get(LIGHTWEIGHT_NAME_LABEL) or annotations.get(GANG_NAME) or ""
    )


def gang_id(namespace: str, name: str) -> str:
    """A gang's id, ``namespace/name`` (``util.GetId``)."""
    return f"{namespace}/{name}"


def in_pod_group(pod: Mapping[str, Any]) -> bool:
    """The pod names a PodGroup object (the CRD way) rather than describing its gang itself."""
    return bool(_map(_map(pod, "metadata"), "labels").get(POD_GROUP_LABEL))
