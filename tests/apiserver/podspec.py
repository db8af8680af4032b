"""Pods as kube-apiserver treats them: decode defaults, QoS class, create validation and what an update may
change.

Defaults follow ``pkg/apis/core/v1/defaults.go`` (``SetDefaults_Pod``/``PodSpec``/``Container``: requests
default to limits, restart and DNS policy, grace period 30 s, scheduler name, image pull policy, the
termination message path, probe timings, TCP ports). The QoS class is ``qos.GetPodQOS``: Guaranteed when
every container limits cpu and memory at its requests, BestEffort when none requests or limits either,
else Burstable. ``update_errors`` is ``ValidatePodUpdate``: only container and init-container images,
``activeDeadlineSeconds`` (set or shortened), added tolerations, removed scheduling gates and a negative
grace period raised to 1 may change; anything else in ``spec`` is a 422 Forbidden.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.apiserver.status import Cause
from tests.apiserver.validation import DNS_LABEL, quantity_value

Obj = dict[str, Any]
CONTAINER_LISTS = ("initContainers", "containers")
DEFAULT_SCHEDULER = "default-scheduler"
_QOS_RESOURCES = ("cpu", "memory")
_STANDARD = frozenset({"cpu", "memory", "ephemeral-storage"})
_PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
_UPDATABLE = (
    "spec.containers[*].image, spec.initContainers[*].image, spec.activeDeadlineSeconds, "
    "spec.tolerations (additions only), spec.schedulingGates (removals only) and "
    "spec.terminationGracePeriodSeconds (from a negative value to 1)"
)


def _containers(spec: Obj) -> list[Obj]:
    return [c for field in CONTAINER_LISTS for c in spec.get(field) or () if isinstance(c, dict)]


def _pull_policy(image: str) -> str:
    if "@" in image:
        return "IfNotPresent"
    tag = image.rsplit("/", 1)[-1].partition(":")[2]
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def set_defaults(pod: Obj) -> None:
    """Fill what decoding a v1 Pod fills (in place)."""
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    spec.setdefault("enableServiceLinks", True)
    if spec.get("serviceAccountName"):
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
    for c in _containers(spec):
        res = c.get("resources")
        if isinstance(res, dict) and isinstance(res.get("limits"), dict):
            requests = res.setdefault("requests", {})
            for name, value in res["limits"].items():
                requests.setdefault(name, value)
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        if isinstance(c.get("image"), str):
            c.setdefault("imagePullPolicy", _pull_policy(c["image"]))
        c.setdefault("resources", {})
        for port in c.get("ports") or ():
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            if isinstance(c.get(probe), dict):
                for key, value in _PROBE_DEFAULTS.items():
                    c[probe].setdefault(key, value)


def qos_class(pod: Obj) -> str:
    """``qos.GetPodQOS`` over containers and init containers, counting cpu and memory only."""
    requests: dict[str, bool] = {}
    limited = {r: True for r in _QOS_RESOURCES}
    guaranteed = True
    for c in _containers(pod.get("spec") or {}):
        res = c.get("resources") or {}
        req = {k: v for k, v in (res.get("requests") or {}).items() if k in _QOS_RESOURCES and not _zero(v)}
        lim = {k: v for k, v in (res.get("limits") or {}).items() if k in _QOS_RESOURCES and not _zero(v)}
        requests.update(dict.fromkeys(req, True))
        for r in _QOS_RESOURCES:
            if r not in lim:
                limited[r] = False
        if any(quantity_value(lim.get(k)) != quantity_value(v) for k, v in req.items()) or set(lim) != set(
            _QOS_RESOURCES
        ):
            guaranteed = False
        requests.update(dict.fromkeys(lim, True))
    if not requests:
        return "BestEffort"
    return "Guaranteed" if guaranteed and all(limited.values()) else "Burstable"


def _zero(value: Any) -> bool:
    return quantity_value(value) == 0


def create_errors(pod: Obj) -> list[Cause]:
    """The parts of ``ValidatePodCreate`` that catch real mistakes: containers named and imaged,
    unique names, parseable quantities, requests within limits, a known restart policy."""
    spec = pod.get("spec") or {}
    out: list[Cause] = []
    if not spec.get("containers"):
        out.append(("spec.containers", "", "Required"))
    seen: set[str] = set()
    for field in CONTAINER_LISTS:
        for i, c in enumerate(spec.get(field) or ()):
            where = f"spec.{field}[{i}]"
            name = c.get("name") or ""
            if not name:
                out.append((f"{where}.name", "", "Required"))
            elif not DNS_LABEL.match(name):
                out.append((f"{where}.name", f"{name!r}: must be an RFC 1123 label"))
            elif name in seen:
                out.append((f"{where}.name", repr(name), "Duplicate"))
            seen.add(name)
            if not c.get("image"):
                out.append((f"{where}.image", "", "Required"))
            out += _resource_errors(c.get("resources") or {}, f"{where}.resources")
    if spec.get("restartPolicy") not in (None, "Always", "OnFailure", "Never"):
        out.append(("spec.restartPolicy", repr(spec["restartPolicy"]), "NotSupported"))
    return out


def _resource_errors(res: Obj, where: str) -> list[Cause]:
    """``ValidateContainerResourceRequirements``: requests within limits; unprefixed names must be
    standard; extended resources (outside ``kubernetes.io/``) are whole numbers, requested at their limit."""
    out: list[Cause] = []
    requests, limits = res.get("requests") or {}, res.get("limits") or {}
    for field, values in (("requests", requests), ("limits", limits)):
        for name, value in values.items():
            at = f"{where}.{field}[{name}]"
            if "/" not in name and name not in _STANDARD and not name.startswith("hugepages-"):
                out.append((at, f"{name!r}: must be a standard resource for containers"))
            amount = quantity_value(value)
            if amount is None:
                continue
            if amount < 0:
                out.append((at, f"{value!r}: must be greater than or equal to 0"))
            if _extended(name) and amount.denominator != 1:
                out.append((at, f"{value!r}: must be an integer"))
    for name, value in requests.items():
        req, lim = quantity_value(value), quantity_value(limits.get(name))
        if req is None:
            continue
        if lim is not None and req > lim:
            out.append(
                (
                    f"{where}.requests[{name}]",
                    f"{value!r}: must be less than or equal to {name} limit of {limits[name]}",
                )
            )
        if _extended(name) and (lim is None or req != lim):
            out.append(
                (
                    f"{where}.requests[{name}]",
                    f"{value!r}: must be equal to {name} limit of {limits.get(name)}",
                )
            )
    return out


def _extended(name: str) -> bool:
    domain = name.partition("/")[0] if "/" in name else ""
    native = not domain or domain == "kubernetes.io" or domain.endswith(".kubernetes.io")
    return not native and not name.startswith("requests.")


def update_errors(new: Obj, old: Obj) -> list[Cause]:
    """``ValidatePodUpdate``: put every field an update may change back to its old value; any other
    difference left in ``spec`` is forbidden."""
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    probe = copy.deepcopy(new_spec)
    for field in CONTAINER_LISTS:
        news, olds = probe.get(field) or [], old_spec.get(field) or []
        if len(news) == len(olds):
            for n, o in zip(news, olds, strict=True):
                if isinstance(n, dict) and isinstance(o, dict) and "image" in o:
                    n["image"] = o["image"]
    old_deadline, new_deadline = old_spec.get("activeDeadlineSeconds"), probe.get("activeDeadlineSeconds")
    if new_deadline is not None and (old_deadline is None or 0 < new_deadline <= old_deadline):
        _restore(probe, old_spec, "activeDeadlineSeconds")
    if all(t in (probe.get("tolerations") or []) for t in old_spec.get("tolerations") or []):
        _restore(probe, old_spec, "tolerations")
    if all(g in (old_spec.get("schedulingGates") or []) for g in probe.get("schedulingGates") or []):
        _restore(probe, old_spec, "schedulingGates")
    old_grace = old_spec.get("terminationGracePeriodSeconds")
    if old_grace is not None and old_grace < 0 and probe.get("terminationGracePeriodSeconds") == 1:
        _restore(probe, old_spec, "terminationGracePeriodSeconds")
    if probe == old_spec:
        return []
    changed = sorted(k for k in set(probe) | set(old_spec) if probe.get(k) != old_spec.get(k))
    return [
        (
            "spec",
            f"pod updates may not change fields other than {_UPDATABLE} (changed: {', '.join(changed)})",
            "Forbidden",
        )
    ]


def _restore(probe: Obj, old: Obj, field: str) -> None:
    if field in old:
        probe[field] = copy.deepcopy(old[field])
    else:
        probe.pop(field, None)
