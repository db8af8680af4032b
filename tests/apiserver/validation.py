"""Validation the real server does on built-in objects, written from kubernetes' ``pkg/apis/*/validation``.

Two kinds of failure, as kube-apiserver has them: a body that does not *decode* (a MicroTime without its
six fractional digits, a time that is not RFC 3339, a malformed quantity) is a 400 BadRequest before any
validation; a decoded object that breaks a rule is a 422 Invalid listing field errors. Covered: object
names (DNS subdomain, or label for namespaces), labels, finalizers added to an object being deleted,
Leases (``ValidateLeaseSpec``), ConfigMaps (keys, size, ``immutable``), PodDisruptionBudgets (min/max
exclusive, int-or-percent), core Events (``legacyValidateEvent``: involvedObject namespace, the fields a
new-style event must carry) and node resource quantities.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from tests.apiserver import status
from tests.apiserver.status import Cause

Obj = dict[str, Any]

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_LABEL = re.compile(rf"^{_LABEL}$")
DNS_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_PERCENT = re.compile(r"^[0-9]+%$")
MICRO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")
TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_SUFFIXES = {
    **{s: Fraction(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    **{s: Fraction(10) ** e for s, e in (("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6))},
    **{s: Fraction(10) ** e for s, e in (("G", 9), ("T", 12), ("P", 15), ("E", 18))},
}
CONFIGMAP_MAX_BYTES = 1024 * 1024
EVENT_FIELD_LIMIT = 128
EVENT_NOTE_LIMIT = 1024


# ---- decoding (400) --------------------------------------------------------------------------------


def walk(obj: Any, path: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
    """Values at ``path`` in ``obj`` (``*`` steps into every list item or map value), with dotted paths."""

    def go(value: Any, rest: tuple[str, ...], where: str) -> Iterator[tuple[str, Any]]:
        if not rest:
            yield where, value
            return
        step, tail = rest[0], rest[1:]
        if step == "*":
            if isinstance(value, list):
                for i, item in enumerate(value):
                    yield from go(item, tail, f"{where}[{i}]")
            elif isinstance(value, dict):
                for k, item in value.items():
                    yield from go(item, tail, f"{where}[{k}]")
        elif isinstance(value, dict) and value.get(step) is not None:
            yield from go(value[step], tail, f"{where}.{step}" if where else step)

    return go(obj, path, "")


def _time_ok(value: Any, pattern: re.Pattern[str]) -> bool:
    if not isinstance(value, str) or not pattern.match(value):
        return False
    try:
        datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def decode_errors(
    obj: Obj,
    *,
    micro_times: tuple[tuple[str, ...], ...] = (),
    times: tuple[tuple[str, ...], ...] = (),
    quantities: tuple[tuple[str, ...], ...] = (),
) -> list[str]:
    """Why ``obj`` would not decode into its Go type (empty when it would)."""
    out = []
    for path in micro_times:
        for where, value in walk(obj, path):
            if not _time_ok(value, MICRO_TIME):
                out.append(
                    f'{where}: parsing time "{value}": a MicroTime needs RFC 3339 with six fractional digits'
                )
    for path in times:
        for where, value in walk(obj, path):
            if not _time_ok(value, TIME):
                out.append(f'{where}: parsing time "{value}": not RFC 3339')
    for path in quantities:
        for where, value in walk(obj, path):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok and not (isinstance(value, str) and QUANTITY.match(value)):
                out.append(f"{where}: quantities must match the regular expression of a Kubernetes quantity")
    return out


def refuse_undecodable(kind: str, version: str, problems: list[str]) -> None:
    if problems:
        raise status.bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: {problems[0]}'
        )


def quantity_value(value: Any) -> Fraction | None:
    """The exact amount of a quantity, or None when it is missing or does not parse."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return Fraction(str(value))
    m = QUANTITY.match(str(value).strip())
    if m is None:
        return None
    number, suffix = Fraction(m.group(1)), m.group(3) or ""
    if suffix[:1] in ("e", "E"):
        return number * Fraction(10) ** int(suffix[1:])
    return number * _SUFFIXES[suffix]


# ---- object metadata ------------------------------------------------------------------------------


def name_errors(name: str, *, label: bool = False, path_segment: bool = False) -> list[Cause]:
    if path_segment:
        if name in (".", "..") or "/" in name or "%" in name:
            return [("metadata.name", f"{name!r}: may not be '.' or '..' or contain '/' or '%'")]
        return []
    if label:
        pattern, limit, what = DNS_LABEL, 63, "a lowercase RFC 1123 label (alphanumerics and '-')"
    else:
        pattern, limit, what = (
            DNS_SUBDOMAIN,
            253,
            "a lowercase RFC 1123 subdomain (alphanumerics, '-' and '.')",
        )
    if len(name) > limit or not pattern.match(name):
        return [("metadata.name", f"{name!r}: must be {what}")]
    return []


def qualified_name_errors(key: str, where: str) -> list[Cause]:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix)):
        return [(where, f"{key!r}: prefix part must be a DNS subdomain")]
    if len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return [(where, f"{key!r}: name part must be a qualified name of at most 63 characters")]
    return []


def meta_errors(obj: Obj) -> list[Cause]:
    meta = obj.get("metadata") or {}
    out: list[Cause] = []
    for key, value in (meta.get("labels") or {}).items():
        out += qualified_name_errors(key, "metadata.labels")
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            out.append(("metadata.labels", f"{value!r}: a label value must be at most 63 characters"))
    for key in meta.get("annotations") or {}:
        out += qualified_name_errors(key, "metadata.annotations")
    return out


def meta_update_errors(new: Obj, old: Obj) -> list[Cause]:
    """``ValidateObjectMetaUpdate``: no finalizer may be added once deletion has started."""
    if not old["metadata"].get("deletionTimestamp"):
        return []
    added = set(new["metadata"].get("finalizers") or ()) - set(old["metadata"].get("finalizers") or ())
    if added:
        why = f"no new finalizers can be added if the object is being deleted, found {sorted(added)}"
        return [("metadata.finalizers", why, "Forbidden")]
    return []


# ---- per type ---------------------------------------------------------------------------------------


def lease_errors(lease: Obj) -> list[Cause]:
    """``ValidateLeaseSpec`` (``pkg/apis/coordination/validation``)."""
    spec = lease.get("spec") or {}
    out: list[Cause] = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and duration <= 0:
        out.append(("spec.leaseDurationSeconds", f"{duration}: must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if transitions is not None and transitions < 0:
        out.append(("spec.leaseTransitions", f"{transitions}: must be greater than or equal to 0"))
    if spec.get("preferredHolder") and not spec.get("strategy"):
        out.append(("spec.strategy", "a preferredHolder needs a strategy", "Required"))
    return out


def configmap_errors(cm: Obj) -> list[Cause]:
    """``ValidateConfigMap``: key syntax, no key in both data and binaryData, at most 1 MiB in all."""
    out: list[Cause] = []
    data, binary = cm.get("data") or {}, cm.get("binaryData") or {}
    size = 0
    for field, values in (("data", data), ("binaryData", binary)):
        for key, value in values.items():
            if len(key) > 253 or key in (".", "..") or not _CONFIG_KEY.match(key):
                out.append(
                    (
                        f"{field}[{key}]",
                        f"{key!r}: a valid config key must consist of alphanumerics, '-', '_' or '.'",
                    )
                )
            size += len(key) + len(str(value))
    for key in set(data) & set(binary):
        out.append((f"data[{key}]", f"{key!r}: duplicate of key present in binaryData"))
    if size > CONFIGMAP_MAX_BYTES:
        out.append(("", f"Too long: must have at most {CONFIGMAP_MAX_BYTES} bytes"))
    return out


def configmap_update_errors(new: Obj, old: Obj) -> list[Cause]:
    """An ``immutable`` ConfigMap keeps its data and stays immutable (``ValidateConfigMapUpdate``)."""
    if not old.get("immutable"):
        return []
    out: list[Cause] = []
    if not new.get("immutable"):
        out.append(("immutable", "field is immutable when `immutable` is set", "Forbidden"))
    for field in ("data", "binaryData"):
        if (new.get(field) or {}) != (old.get(field) or {}):
            out.append((field, "field is immutable when `immutable` is set", "Forbidden"))
    return out


def _int_or_percent_errors(value: Any, where: str) -> list[Cause]:
    if isinstance(value, bool):
        return [(where, f"{value!r}: must be an integer or percentage")]
    if isinstance(value, int):
        return [] if value >= 0 else [(where, f"{value}: must be greater than or equal to 0")]
    if isinstance(value, str) and _PERCENT.match(value):
        return [] if int(value[:-1]) <= 100 else [(where, f"{value!r}: must not be greater than 100%")]
    return [(where, f"{value!r}: must be an integer or percentage (e.g '5%')")]


def pdb_errors(pdb: Obj) -> list[Cause]:
    """``ValidatePodDisruptionBudgetSpec`` (``pkg/apis/policy/validation``)."""
    spec = pdb.get("spec") or {}
    out: list[Cause] = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        out.append(("spec", "minAvailable and maxUnavailable cannot be both set"))
    for field in ("minAvailable", "maxUnavailable"):
        if spec.get(field) is not None:
            out += _int_or_percent_errors(spec[field], f"spec.{field}")
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in ("IfHealthyBudget", "AlwaysAllow"):
        out.append(
            (
                "spec.unhealthyPodEvictionPolicy",
                f"{policy!r}: supported values: AlwaysAllow, IfHealthyBudget",
                "NotSupported",
            )
        )
    for i, expr in enumerate((spec.get("selector") or {}).get("matchExpressions") or ()):
        if expr.get("operator") not in ("In", "NotIn", "Exists", "DoesNotExist"):
            out.append(
                (
                    f"spec.selector.matchExpressions[{i}].operator",
                    f"{expr.get('operator')!r}: not a valid selector operator",
                )
            )
    return out


def event_errors(event: Obj, *, events_api: bool) -> list[Cause]:
    """Core Events as stored (``legacyValidateEvent``, ``ValidateEventCreate``): an old-style event (no
    eventTime) names its involved object's namespace or, for cluster objects, lives in ``default``; a
    new-style one carries reportingController/Instance, action and reason. ``events_api`` is a write
    through ``events.k8s.io/v1``, which also requires eventTime and a Normal/Warning type."""
    ns = event["metadata"].get("namespace", "")
    involved = (event.get("involvedObject") or {}).get("namespace", "")
    out: list[Cause] = []
    mismatch = ("involvedObject.namespace", f"{involved!r}: does not match event.namespace")
    controller = "reportingController" if events_api else "reportingComponent"
    if events_api and not event.get("eventTime"):
        out.append(("eventTime", "", "Required"))
    if events_api and event.get("type") not in ("Normal", "Warning"):
        out.append(("type", f"{event.get('type')!r}: supported values: Normal, Warning", "NotSupported"))
    if not event.get("eventTime"):
        if (involved and involved != ns) or (not involved and ns not in ("", "default")):
            out.append(mismatch)
        return out
    if not involved and ns not in ("default", "kube-system"):
        out.append(mismatch)
    for field, name in (
        ("reportingComponent", controller),
        ("reportingInstance", "reportingInstance"),
        ("action", "action"),
        ("reason", "reason"),
    ):
        value = event.get(field) or ""
        if not value:
            out.append((name, "", "Required"))
        elif len(value) > EVENT_FIELD_LIMIT:
            out.append((name, f"can have at most {EVENT_FIELD_LIMIT} characters"))
    if len(event.get("message") or "") > EVENT_NOTE_LIMIT:
        out.append(("note" if events_api else "message", f"can have at most {EVENT_NOTE_LIMIT} characters"))
    return out


def node_errors(node: Obj) -> list[Cause]:
    """``ValidateNodeResources``: capacity and allocatable are non-negative, under qualified names."""
    out: list[Cause] = []
    st = node.get("status") or {}
    for field in ("capacity", "allocatable"):
        for name, value in (st.get(field) or {}).items():
            out += qualified_name_errors(name, f"status.{field}[{name}]")
            if str(value).lstrip().startswith("-"):
                out.append((f"status.{field}[{name}]", f"{value!r}: must be greater than or equal to 0"))
    for i, taint in enumerate((node.get("spec") or {}).get("taints") or ()):
        if taint.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            out.append(
                (f"spec.taints[{i}].effect", f"{taint.get('effect')!r}: not a taint effect", "NotSupported")
            )
    return out
