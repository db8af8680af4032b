"""The ClusterColocationProfile mutation of a pod at creation (Koordinator's
``webhook/pod/mutating/cluster_colocation_profile.go``).

The profiles whose ``namespaceSelector`` and ``selector`` match (absent or empty: all) apply in name
order, each unless its ``probability`` draws it out: labels, annotations, key mappings and suffixes, the
scheduler name, QoS class, priority class (value and preemption policy from the PriorityClass),
``koordinator.sh/priority`` and a strategic-merge ``patch``. Then, unless a profile carries
``config.koordinator.sh/skip-update-resources``, a Batch or Mid pod's cpu and memory requests and limits
(init containers and overhead too) become ``kubernetes.io/batch-*``/``mid-*`` (cpu in millicores), a
limit without a request giving the request. A malformed selector matches nothing here (Koordinator
applies the profile).
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordshared.apis.core import pod as podschema
from koordshared.apis.extension import qos as extension
from koordshared.apis.meta.quantity import format_decimal, to_milli
from koordshared.apis.meta.selector import parse_selector
from koordshared.runtime.errors import InvalidValue

Obj = Mapping[str, Any]
SKIP_UPDATE_RESOURCES = "config.koordinator.sh/skip-update-resources"
EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"
RESOURCE_NAMES: Mapping[extension.PriorityClass, Mapping[str, str]] = {
    extension.PriorityClass.BATCH: {"cpu": extension.BATCH_CPU, "memory": extension.BATCH_MEMORY},
    extension.PriorityClass.MID: {"cpu": extension.MID_CPU, "memory": extension.MID_MEMORY},
}
"""``ResourceNameMap``: the resources a Batch or Mid pod asks for instead of cpu and memory."""


class ProfileError(ValueError):
    """A profile cannot be applied (an unknown PriorityClass, a bad probability or patch)."""


@dataclass(frozen=True, slots=True)
class Lookups:
    """What the mutation reads from the cluster."""

    namespace_labels: Callable[[str], Mapping[str, str]]
    priority_class: Callable[[str], Obj | None]
    draw: Callable[[int], int] = random.randrange
    """``rand.Intn``: a number in [0, n)."""


def _selected(raw: Any, labels: Mapping[str, str]) -> bool:
    if raw is None or raw == {}:
        return True
    selector = parse_selector(raw)
    return not selector.error and selector.matches(labels)


def _percent(raw: Any) -> int:
    """``GetScaledValueFromIntOrPercent(probability, 100, false)``."""
    if raw is None:
        return 100
    if isinstance(raw, bool):
        raise ProfileError(f"probability {raw!r} is not an int or a percent")
    if isinstance(raw, int):
        return raw
    text = str(raw)
    if not text.endswith("%") or not text[:-1].lstrip("-").isdigit():
        raise ProfileError(
            f"invalid value for IntOrString: invalid type: string is not a percentage: {text!r}"
        )
    return int(text[:-1])  # round down, as Go's scaled value without rounding up


def skipped(profile: Obj, draw: Callable[[int], int]) -> bool:
    """``shouldSkipProfile``: 0 % never applies, 100 % always, otherwise a draw above the percent skips."""
    percent = _percent(podschema.as_map(profile, "spec").get("probability"))
    return percent == 0 or (percent != 100 and draw(100) > percent)


def _strategic_merge(target: Any, patch: Any) -> Any:
    """A strategic merge patch of a pod, for what profiles write: objects merged key by key (``null``
    removes), ``containers``/``initContainers``/``volumes``/``tolerations`` lists merged by their key,
    other lists replaced."""
    if not isinstance(patch, Mapping) or not isinstance(target, Mapping):
        return copy.deepcopy(patch)
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif key in ("containers", "initContainers", "volumes") and isinstance(value, list):
            merged = [dict(c) for c in out.get(key) or []]
            for item in value:
                name = item.get("name") if isinstance(item, Mapping) else None
                at = next((i for i, c in enumerate(merged) if c.get("name") == name), None)
                if at is None:
                    merged.append(copy.deepcopy(item))
                else:
                    merged[at] = _strategic_merge(merged[at], item)
            out[key] = merged
        else:
            out[key] = _strategic_merge(out.get(key), value)
    return out


def apply_profile(pod: dict[str, Any], profile: Obj, lookups: Lookups) -> dict[str, Any]:
    """``doMutateByColocationProfile``: ``pod`` with ``profile``'s changes."""
    spec = podschema.as_map(profile, "spec")
    meta = pod.setdefault("metadata", {})
    pod_spec = pod.setdefault("spec", {})

    def labels() -> dict[str, str]:
        out: dict[str, str] = meta.setdefault("labels", {}) or {}
        meta["labels"] = out
        return out

    def annotations() -> dict[str, str]:
        out: dict[str, str] = meta.setdefault("annotations", {}) or {}
        meta["annotations"] = out
        return out

    for key, value in (spec.get("labels") or {}).items():
        labels()[key] = value
    for key, value in (spec.get("annotations") or {}).items():
        annotations()[key] = value
    for old, new in (spec.get("labelKeysMapping") or {}).items():
        labels()[new] = labels().get(old, "")
    for old, new in (spec.get("annotationKeysMapping") or {}).items():
        annotations()[new] = annotations().get(old, "")
    for key, suffix in (spec.get("labelSuffixes") or {}).items():
        if key in labels():
            labels()[key] += suffix
    if spec.get("schedulerName"):
        pod_spec["schedulerName"] = spec["schedulerName"]
    if spec.get("qosClass"):
        labels()[extension.LABEL_QOS] = str(spec["qosClass"])
    if spec.get("priorityClassName"):
        name = str(spec["priorityClassName"])
        pc = lookups.priority_class(name)
        if pc is None:
            raise ProfileError(f'priorityclasses.scheduling.k8s.io "{name}" not found')
        pod_spec["priorityClassName"] = name
        pod_spec["priority"] = int(pc.get("value") or 0)
        if pc.get("preemptionPolicy"):
            pod_spec["preemptionPolicy"] = pc["preemptionPolicy"]
        else:
            pod_spec.pop("preemptionPolicy", None)
    if spec.get("koordinatorPriority") is not None:
        labels()[extension.LABEL_POD_SUB_PRIORITY] = str(int(spec["koordinatorPriority"]))
    patch = spec.get("patch")
    if patch:
        if not isinstance(patch, Mapping):
            raise ProfileError("patch must be an object")
        pod = _strategic_merge(pod, patch)
    return pod


def _priority_class(pod: Obj) -> extension.PriorityClass:
    meta, spec = podschema.as_map(pod, "metadata"), podschema.as_map(pod, "spec")
    labels = podschema.str_map(podschema.as_map(meta, "labels"))
    raw = spec.get("priority")
    priority = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
    qos = extension.qos_of(labels, podschema.kube_qos_of(pod))
    return extension.priority_class_of(labels, priority, qos)


def _replace(names: Mapping[str, str], resources: dict[str, Any] | None) -> None:
    """``replaceAndEraseResource``: cpu (as millicores) and memory moved to their extended names."""
    if not resources:
        return
    for plain, extended in names.items():
        if plain in resources:
            value = resources.pop(plain)
            if plain == "cpu":
                try:
                    value = format_decimal(to_milli(value))
                except (InvalidValue, TypeError) as err:
                    raise ProfileError(f"cpu {value!r}: {err}") from None
            resources[extended] = value


def convert_resources(pod: dict[str, Any]) -> None:
    """``mutatePodResourceSpec``: a Batch or Mid pod's cpu and memory into its extended resources."""
    names = RESOURCE_NAMES.get(_priority_class(pod))
    if names is None:
        return
    spec = pod.get("spec") or {}
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            res = container.get("resources")
            if not isinstance(res, dict):
                continue
            _replace(names, res.get("requests"))
            _replace(names, res.get("limits"))
            for extended in names.values():  # restrictResourceRequestAndLimit
                limits = res.get("limits") or {}
                if extended in limits and extended not in (res.get("requests") or {}):
                    res.setdefault("requests", {})
                    if res["requests"] is None:
                        res["requests"] = {}
                    res["requests"][extended] = limits[extended]
    if isinstance(spec.get("overhead"), dict):
        _replace(names, spec["overhead"])


def extended_resource_spec(pod: dict[str, Any]) -> None:
    """``mutateByExtendedResources``: the containers' batch requests and limits as the annotation the
    agent reads, set when it differs."""
    containers: dict[str, Any] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        res = container.get("resources") or {}
        want: dict[str, Any] = {"requests": {}, "limits": {}}
        for part in ("requests", "limits"):
            for name in (extension.BATCH_CPU, extension.BATCH_MEMORY):
                if name in (res.get(part) or {}):
                    want[part][name] = res[part][name]
        if want["requests"] or want["limits"]:
            containers[str(container.get("name") or "")] = {k: v for k, v in want.items() if v}
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    try:
        have = (
            json.loads(annotations[EXTENDED_RESOURCE_SPEC]) if EXTENDED_RESOURCE_SPEC in annotations else {}
        )
    except ValueError as err:
        raise ProfileError(f"failed to get current extended resource spec, err: {err}") from None
    want_doc = {"containers": containers} if containers else {}
    if have == want_doc:
        return
    meta = pod.setdefault("metadata", {})
    meta.setdefault("annotations", {})
    if meta["annotations"] is None:
        meta["annotations"] = {}
    meta["annotations"][EXTENDED_RESOURCE_SPEC] = json.dumps(want_doc, separators=(",", ":"))


def mutate(pod: Obj, profiles: Sequence[Obj], lookups: Lookups) -> dict[str, Any]:
    """The pod as Koordinator's mutating webhook leaves it at creation."""
    out: dict[str, Any] = copy.deepcopy(dict(pod))
    meta = podschema.as_map(out, "metadata")
    namespace = str(meta.get("namespace") or "")
    pod_labels = podschema.str_map(podschema.as_map(meta, "labels"))
    matched = []
    ns_labels: Mapping[str, str] | None = None
    for profile in profiles:
        spec = podschema.as_map(profile, "spec")
        if spec.get("namespaceSelector") not in (None, {}):
            if ns_labels is None:
                ns_labels = lookups.namespace_labels(namespace)
            if not _selected(spec.get("namespaceSelector"), ns_labels):
                continue
        if not _selected(spec.get("selector"), pod_labels):
            continue
        matched.append(profile)
    if not matched:
        extended_resource_spec(out)
        return out
    matched.sort(key=lambda p: str(podschema.as_map(p, "metadata").get("name") or ""))
    skip_resources = False
    for profile in matched:
        if SKIP_UPDATE_RESOURCES in (podschema.as_map(profile, "metadata").get("annotations") or {}):
            skip_resources = True
        if skipped(profile, lookups.draw):
            continue
        out = apply_profile(out, profile, lookups)
    if not skip_resources:
        convert_resources(out)
    extended_resource_spec(out)
    return out
