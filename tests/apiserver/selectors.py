"""Field and label selectors as the API server parses them (``?fieldSelector=``, ``?labelSelector=``).

Field selectors: comma-separated ``field=value``, ``field==value``, ``field!=value`` on the fields a
resource supports (anything else is a 400, like the real server); a missing field compares as its Go
zero value as the type's field set prints it: ``"false"`` for a boolean (``spec.unschedulable``,
``spec.hostNetwork``: ``fields.Set`` holds ``strconv.FormatBool`` of the Go bool), else ``""``.
Label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists), ``!k``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from tests.apiserver.status import bad_request


@dataclasses.dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str
    missing: str = ""  # what the field reads as when the object does not set it

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (field_value(obj, self.field, self.missing) == self.value) == self.equal


@dataclasses.dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" also match objects without the label, as in Kubernetes.
        return not present or labels[self.key] not in self.values


def field_value(obj: Mapping[str, Any], path: str, missing: str = "") -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return missing
        cur = cur[part]
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if cur is None:
        return missing
    if isinstance(cur, Mapping):
        # "source" on core events is an object; the server matches its component.
        return str(cur.get("component", ""))
    return str(cur)


def parse_fields(
    selector: str | None,
    supported: Iterable[str],
    missing: Mapping[str, str] | None = None,
    stored: Mapping[str, str] | None = None,
) -> list[FieldRequirement]:
    if not selector:
        return []
    allowed = set(supported)
    out = []
    for raw in selector.split(","):
        term = raw.strip()
        if not term:
            continue
        match = re.fullmatch(r"([^=!]+?)\s*(==|=|!=)\s*(.*)", term)
        if match is None:
            raise bad_request(f'invalid field selector: "{term}"')
        field, op, value = match.groups()
        if field not in allowed:
            raise bad_request(f'field label not supported: "{field}"')
        path = (stored or {}).get(field, field)
        out.append(FieldRequirement(path, op != "!=", value, (missing or {}).get(field, "")))
    return out


def _split_top(selector: str) -> list[str]:
    """Split at commas outside parentheses (``a in (x,y),b`` is two terms)."""
    terms, depth, cur = [], 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append(cur)
            cur = ""
        else:
            cur += ch
    terms.append(cur)
    return [t.strip() for t in terms if t.strip()]


_KEY = r"[A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?"


def parse_labels(selector: str | None) -> list[LabelRequirement]:
    if not selector:
        return []
    out = []
    for term in _split_top(selector):
        if m := re.fullmatch(rf"({_KEY})\s+(in|notin)\s+\((.*)\)", term):
            values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
            out.append(LabelRequirement(m.group(1), m.group(2), values))
        elif m := re.fullmatch(rf"({_KEY})\s*(==|=|!=)\s*([-A-Za-z0-9_.]*)", term):
            op = "!=" if m.group(2) == "!=" else "="
            out.append(LabelRequirement(m.group(1), op, frozenset({m.group(3)})))
        elif m := re.fullmatch(rf"!\s*({_KEY})", term):
            out.append(LabelRequirement(m.group(1), "!exists", frozenset()))
        elif m := re.fullmatch(rf"({_KEY})", term):
            out.append(LabelRequirement(m.group(1), "exists", frozenset()))
        else:
            raise bad_request(f"unable to parse requirement: {term!r}")
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class Selector:
    """A parsed pair of field and label selectors; empty matches everything."""

    fields: tuple[FieldRequirement, ...] = ()
    labels: tuple[LabelRequirement, ...] = ()

    @classmethod
    def parse(
        cls,
        field_selector: str | None,
        label_selector: str | None,
        supported: Iterable[str],
        missing: Mapping[str, str] | None = None,
        stored: Mapping[str, str] | None = None,
    ) -> Selector:
        """``missing``: what a supported field reads as when an object does not set it (default "");
        ``stored``: the stored field a supported label selects when it is not the label itself."""
        fields = parse_fields(field_selector, supported, missing, stored)
        return cls(tuple(fields), tuple(parse_labels(label_selector)))

    def matches(self, obj: Mapping[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(r.matches(obj) for r in self.fields) and all(r.matches(labels) for r in self.labels)

    @property
    def empty(self) -> bool:
        return not self.fields and not self.labels


_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}


def label_selector(selector: Mapping[str, Any] | None) -> tuple[LabelRequirement, ...] | None:
    """A ``metav1.LabelSelector`` object as requirements (``LabelSelectorAsSelector``); None for a null
    selector or one that does not parse."""
    if selector is None:
        return None
    out = [
        LabelRequirement(k, "=", frozenset({str(v)})) for k, v in (selector.get("matchLabels") or {}).items()
    ]
    for expr in selector.get("matchExpressions") or ():
        op = _OPERATORS.get(expr.get("operator", ""))
        if op is None:
            return None
        out.append(
            LabelRequirement(str(expr.get("key", "")), op, frozenset(map(str, expr.get("values") or ())))
        )
    return tuple(out)
