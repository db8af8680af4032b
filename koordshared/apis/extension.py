"""Koordinator's pod vocabulary (its ``apis/extension``): QoS classes, Kubernetes QoS and priority bands.

Pure: stdlib only. The agent's plugin contract (``koordlet.api``) re-exports these names, and every cluster
process reads pods with the same values.
"""

from __future__ import annotations

import enum


class QOSClass(enum.StrEnum):
    """Koordinator QoS (label ``koordinator.sh/qosClass``; defaulted from the Kubernetes QoS class)."""

    SYSTEM = "SYSTEM"
    LSE = "LSE"
    LSR = "LSR"
    LS = "LS"
    BE = "BE"
    NONE = ""


class KubeQOSClass(enum.StrEnum):
    """Kubernetes QoS class; it picks the kubepods tier (cgroup parent) of the pod."""

    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BESTEFFORT = "BestEffort"


class PriorityClass(enum.StrEnum):
    """Koordinator priority bands (label ``koordinator.sh/priority-class`` or from ``spec.priority``)."""

    PROD = "koord-prod"
    MID = "koord-mid"
    BATCH = "koord-batch"
    FREE = "koord-free"
    NONE = ""
