"""ElasticQuota tree validation (Koordinator's ``webhook/elasticquota/quota_topology*.go``), with its
messages: min and max not negative, every min key in max and min at most max; a parent that exists and is
a parent; a child's max keys the same as its parent's and its min keys among them; the children's min sum
at most the parent's min (brothers included), and a parent's min at least its children's sum; a quota with
children cannot be deleted, nor the built-in ones. Quotas are read from the API at each request, so the
tree is the stored one (Koordinator keeps its own copy from an informer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from koordshared.apis.extension import elasticquota as eq
from koordshared.apis.meta.quantity import parse_quantity
from koordshared.runtime.errors import InvalidValue

Obj = Mapping[str, Any]
ALLOW_FORCE_UPDATE = eq.PREFIX + "/allow-force-update"


class Refused(ValueError):
    """The quota change is refused; ``str()`` is Koordinator's message."""


def _name(q: Obj) -> str:
    return str((q.get("metadata") or {}).get("name") or "")


def _resources(q: Obj, key: str) -> dict[str, tuple[Fraction, str]]:
    raw = (q.get("spec") or {}).get(key) or {}
    out = {}
    for name, text in raw.items():
        try:
            out[str(name)] = (parse_quantity(text), str(text))
        except (InvalidValue, TypeError, ValueError):
            raise Refused(f"quantities must match the regular expression: {name}={text!r}") from None
    return out


def _label(q: Obj, key: str) -> str:
    return str(eq.labels_of(q).get(key) or "")


def _go_list(names: Sequence[str]) -> str:
    return "[" + " ".join(names) + "]"


def check_self(q: Obj) -> None:
    """``validateQuotaSelfItem``."""
    name = _name(q)
    mx, mn = _resources(q, "max"), _resources(q, "min")
    if neg := sorted(k for k, (v, _) in mx.items() if v < 0):
        raise Refused(f"{name} quota.Spec.Max's value < 0, in dimensions :{_go_list(neg)}")
    if neg := sorted(k for k, (v, _) in mn.items() if v < 0):
        raise Refused(f"{name} quota.Spec.Min's value < 0, in dimensions :{_go_list(neg)}")
    for key, (value, text) in mn.items():
        if key not in mx:
            raise Refused(
                f"resourceKey {key} of quota {name} is included in min, which is not included in max"
            )
        if mx[key][0] < value:
            raise Refused(f"resourceKey {key} of quota {name} min {text} > max {mx[key][1]}")


def _sum(quotas: Sequence[Obj]) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for q in quotas:
        for key, (value, _) in _resources(q, "min").items():
            out[key] = out.get(key, Fraction(0)) + value
    return out


def _within(a: Mapping[str, Fraction], b: Mapping[str, tuple[Fraction, str]]) -> bool:
    """``LessThanOrEqualCompletely``: every resource of ``a`` at most ``b``'s (absent: 0)."""
    return all(v <= b.get(k, (Fraction(0), ""))[0] for k, v in a.items())


def check_topology(q: Obj, others: Sequence[Obj]) -> None:
    """``validateQuotaTopology`` for ``q`` among the stored quotas ``others`` (without ``q``)."""
    name, parent = _name(q), eq.parent_name(q)
    if name == eq.ROOT_QUOTA:
        return
    by_name = {_name(o): o for o in others}
    children = [o for o in others if eq.parent_name(o) == name]
    if parent == eq.ROOT_QUOTA and not eq.is_parent(q):
        return
    if parent != eq.ROOT_QUOTA:
        p = by_name.get(parent)
        if p is None:
            raise Refused(f"{name} has parentName {parent} but not find parentInfo in quotaInfoMap")
        if not eq.is_parent(p):
            raise Refused(f"{name} has parentName {parent} but the parentQuotaInfo's IsParent is false")
        prefix = "failed to check sub and parent group quotaKey, err: checkSubAndParentGroupQuotaKey failed: "
        if set(_resources(p, "max")) != set(_resources(q, "max")):
            raise Refused(f"{prefix}{parent}'s max keys are not the same with {name}'s")
        if not set(_resources(q, "min")) <= set(_resources(p, "min")):
            raise Refused(f"{prefix}{name}'s min keys are not all included in {parent}'s")
    for child in children:
        prefix = "failed to check sub and parent group quotaKey, err: checkSubAndParentGroupQuotaKey failed: "
        if set(_resources(q, "max")) != set(_resources(child, "max")):
            raise Refused(f"{prefix}{_name(child)}'s max keys are not the same with {name}'s")
        if not set(_resources(child, "min")) <= set(_resources(q, "min")):
            raise Refused(f"{prefix}{_name(child)}'s min keys are not all included in {name}'s")
    if _label(q, ALLOW_FORCE_UPDATE) == "true" or _label(q, eq.LABEL_IS_ROOT) == "true":
        return
    if parent != eq.ROOT_QUOTA:
        brothers = [o for o in others if eq.parent_name(o) == parent]
        if not _within(_sum([*brothers, q]), _resources(by_name[parent], "min")):
            raise Refused(f"checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: {parent}")
    if children and not _within(_sum(children), _resources(q, "min")):
        raise Refused(f"checkMinQuotaSum all children's MinQuota > current MinQuota, current: {name}")


def check(operation: str, q: Obj | None, old: Obj | None, stored: Sequence[Obj]) -> None:
    """Koordinator's checks of a CREATE, UPDATE or DELETE of an ElasticQuota; :class:`Refused`."""
    if operation == "DELETE":
        gone = old or q or {}
        name = _name(gone)
        if name in eq.BUILT_IN:
            raise Refused(f"can not delete quotaGroup :{name}")
        kids = [o for o in stored if eq.parent_name(o) == name and _name(o) != name]
        if kids:
            raise Refused(f"delete quota failed, quota {name} has {len(kids)} child quotas")
        return
    if q is None:
        raise Refused(f"{operation.title()}Quota param is nil")
    name = _name(q)
    others = [o for o in stored if _name(o) != name]
    if operation == "CREATE" and len(others) != len(stored):
        raise Refused(f"AddQuota quota already exist:{name}")
    if operation == "UPDATE" and old is not None and _fields(old) == _fields(q):
        return
    check_self(q)
    check_topology(q, others)


def _fields(q: Obj) -> tuple[Any, ...]:
    """``quotaFieldsCopy``: what a quota check looks at."""
    meta = q.get("metadata") or {}
    return (
        meta.get("labels"),
        meta.get("annotations"),
        (q.get("spec") or {}).get("min"),
        (q.get("spec") or {}).get("max"),
    )
