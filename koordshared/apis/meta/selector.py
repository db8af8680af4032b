"""``metav1.LabelSelector`` (``matchLabels`` + ``matchExpressions``) as the API writes it (schema layer).

The node strategies of the ``slo-controller-config`` ConfigMap pick nodes with these. Semantics follow
``LabelSelectorAsSelector``: an absent selector matches nothing, an empty one matches everything, and a
malformed one (unknown operator, values where none belong) matches nothing and says why in ``error``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        return self.key not in labels or labels[self.key] not in self.values  # NotIn


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False
    """An absent or malformed selector: matches no node."""
    error: str = ""

    def matches(self, labels: Mapping[str, str]) -> bool:
        return not self.nothing and all(r.matches(labels) for r in self.requirements)


NOTHING = LabelSelector(nothing=True)


def _bad(why: str) -> LabelSelector:
    return LabelSelector(nothing=True, error=why)


def parse_selector(raw: Any) -> LabelSelector:
    """A selector from its JSON (``None`` -> matches nothing)."""
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        return _bad(f"nodeSelector must be an object, got {type(raw).__name__}")
    reqs: list[Requirement] = []
    match_labels = raw.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        return _bad("matchLabels must be an object")
    for key, value in match_labels.items():
        if not isinstance(value, str):
            return _bad(f"matchLabels[{key}] must be a string")
        reqs.append(Requirement(str(key), "In", frozenset((value,))))
    expressions = raw.get("matchExpressions") or []
    if not isinstance(expressions, list):
        return _bad("matchExpressions must be a list")
    for expr in expressions:
        if not isinstance(expr, Mapping) or not isinstance(expr.get("key"), str) or not expr["key"]:
            return _bad("a matchExpressions entry needs a key")
        op, values = expr.get("operator"), expr.get("values") or []
        if op not in _OPERATORS:
            return _bad(f"matchExpressions[{expr['key']}]: unknown operator {op!r}")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            return _bad(f"matchExpressions[{expr['key']}]: values must be strings")
        if (op in ("In", "NotIn")) != bool(values):
            return _bad(
                f"matchExpressions[{expr['key']}]: {op} {'needs' if values == [] else 'takes no'} values"
            )
        reqs.append(Requirement(expr["key"], str(op), frozenset(values)))
    return LabelSelector(tuple(reqs))
