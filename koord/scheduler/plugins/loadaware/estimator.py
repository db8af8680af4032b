"""Koordinator's default estimator (``estimator/default_estimator.go``): what a pod will use, what a node
offers, and the pod facts LoadAware keys on (priority class, DaemonSet ownership).

A pod's estimate per resource is ``round(max(limit, request) * factor / 100)``, capped at the limit,
read from the priority class's own resource (``kubernetes.io/batch-cpu`` for a batch pod, ``mid-cpu``
for a mid pod); a zero request and limit give 250 millicores or 200 MiB (none for mid resources). The
node's capacity is its allocatable with the raw-allocatable annotation laid over it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from koord.scheduler.plugins.loadaware.args import RESOURCES, LoadAwareSchedulingArgs, Vec
from koordshared.apis.core.pod import as_map, kube_qos_of, str_map
from koordshared.apis.core.resources import node_allocatable, pod_limits_list, pod_requests_list, value_of
from koordshared.apis.extension import qos as extension
from koordshared.apis.extension.qos import BATCH_CPU, BATCH_MEMORY, priority_class_of, qos_of

DEFAULT_MILLI_CPU = 250
DEFAULT_MEMORY = 200 * 1024 * 1024
ANNOTATION_SCALING_FACTORS = "scheduling.koordinator.sh/load-estimated-scaling-factors"
ANNOTATION_SECONDS_AFTER_SCHEDULED = "scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled"
ANNOTATION_SECONDS_AFTER_INITIALIZED = "scheduling.koordinator.sh/load-estimated-seconds-after-initialized"

_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")
_TRANSLATED = {
    extension.PriorityClass.BATCH: {"cpu": BATCH_CPU, "memory": BATCH_MEMORY},
    extension.PriorityClass.MID: {"cpu": "kubernetes.io/mid-cpu", "memory": "kubernetes.io/mid-memory"},
}
_DEFAULTS = {
    "cpu": DEFAULT_MILLI_CPU,
    BATCH_CPU: DEFAULT_MILLI_CPU,
    "memory": DEFAULT_MEMORY,
    BATCH_MEMORY: DEFAULT_MEMORY,
}


def priority_class(pod: Any) -> extension.PriorityClass:
    """``GetPodPriorityClassWithDefault``: label, else ``spec.priority`` band, else from the QoS."""
    labels = str_map(as_map(as_map(pod, "metadata"), "labels"))
    priority = as_map(pod, "spec").get("priority")
    prio = priority if isinstance(priority, int) and not isinstance(priority, bool) else None
    return priority_class_of(labels, prio, qos_of(labels, kube_qos_of(pod)))


def round_half_away(x: float) -> int:
    """Go's ``math.Round``: halves away from zero (Python's ``round`` goes to even)."""
    return int(x + 0.5) if x >= 0 else -int(-x + 0.5)


def custom_scaling_factors(pod: Any) -> dict[str, int] | None:
    """The pod's scaling-factors annotation (JSON resource -> int), ``None`` when absent or invalid."""
    text = as_map(as_map(pod, "metadata"), "annotations").get(ANNOTATION_SCALING_FACTORS)
    if not isinstance(text, str) or not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, Mapping) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in doc.values()
    ):
        return None  # Go's unmarshal into map[ResourceName]int64 fails as a whole
    return {str(k): int(v) for k, v in doc.items()}


def custom_seconds(pod: Any, annotation: str) -> int:
    """An integer annotation, ``-1`` when absent or not an integer (``strconv.ParseInt``)."""
    text = as_map(as_map(pod, "metadata"), "annotations").get(annotation)
    if not isinstance(text, str) or not _INTEGER.fullmatch(text):
        return -1
    return int(text)


def estimate_pod(
    pod: Any,
    factors: Mapping[str, int],
    prio: extension.PriorityClass | None = None,
    *,
    allow_customize: bool = False,
) -> Vec:
    """The pod's estimated usage per vectorizer resource (0 for a resource without a factor)."""
    if allow_customize:
        custom = custom_scaling_factors(pod)
        if custom:
            factors = {**factors, **custom}
    prio = priority_class(pod) if prio is None else prio
    translate = _TRANSLATED.get(prio, {})
    requests, limits = pod_requests_list(pod), pod_limits_list(pod)
    out = [0, 0]
    for i, name in enumerate(RESOURCES):
        factor = factors.get(name)
        if factor is None:
            continue
        real = translate.get(name, name)
        req = value_of(real, requests[real]) if real in requests else 0
        lim = value_of(real, limits[real]) if real in limits else 0
        q = max(lim, req)
        if q == 0:
            out[i] = _DEFAULTS.get(real, 0)
            continue
        est = round_half_away(q * factor / 100)
        out[i] = min(est, lim) if lim > 0 else est
    return (out[0], out[1])


_ESTIMATES: dict[Vec, Vec] = {}


def shared_vec(v: Vec) -> Vec:
    """One tuple per distinct estimate: the pods of a workload share theirs (kept for every cached pod,
    so 100 000 pods hold a few hundred). The table starts over when it gets large, which only costs
    sharing."""
    got = _ESTIMATES.get(v)
    if got is None:
        if len(_ESTIMATES) >= 1 << 16:
            _ESTIMATES.clear()
        got = _ESTIMATES[v] = v
    return got


def estimate_with_args(pod: Any, args: LoadAwareSchedulingArgs) -> tuple[extension.PriorityClass, Vec]:
    """The pod's priority class and its estimate under the plugin's args."""
    prio = priority_class(pod)
    factors = args.estimated_scaling_factors
    return prio, estimate_pod(pod, factors, prio, allow_customize=args.allow_customize_estimation)


def node_capacity(node: Any) -> Vec:
    """``EstimateNode`` reduced to the vectorizer: allocatable (raw-allocatable laid over) per resource."""
    alloc = node_allocatable(node)
    return (
        value_of("cpu", alloc["cpu"]) if "cpu" in alloc else 0,
        value_of("memory", alloc["memory"]) if "memory" in alloc else 0,
    )
