"""Building blocks of structural ``openAPIV3Schema`` nodes for the CRD generator (``gen_crds.py``).

Each function returns one schema node as a dict, in the dialect kube-apiserver accepts for CRDs
(``x-kubernetes-int-or-string``, ``x-kubernetes-preserve-unknown-fields``).
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

# The pattern controller-gen emits for resource.Quantity (decimal/binary SI suffixes or an exponent).
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
# metav1.Duration is serialised with Go's time.Duration.String(), e.g. "5m0s".
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"


def obj(properties: Schema, description: str | None = None, **extra: Any) -> Schema:
    out: Schema = {"type": "object"}
    if description:
        out["description"] = description
    out["properties"] = properties
    out.update(extra)
    return out


def string(description: str | None = None, **extra: Any) -> Schema:
    out: Schema = {"type": "string"}
    if description:
        out["description"] = description
    out.update(extra)
    return out


def integer(
    fmt: str = "int64", minimum: int | None = None, maximum: int | None = None, description: str | None = None
) -> Schema:
    out: Schema = {"type": "integer", "format": fmt}
    if description:
        out["description"] = description
    if minimum is not None:
        out["minimum"] = minimum
    if maximum is not None:
        out["maximum"] = maximum
    return out


def percent(description: str | None = None, maximum: int | None = 100) -> Schema:
    return integer("int64", 0, maximum, description)


def boolean(description: str | None = None) -> Schema:
    return {"type": "boolean", **({"description": description} if description else {})}


def array(items: Schema, description: str | None = None) -> Schema:
    out: Schema = {"type": "array"}
    if description:
        out["description"] = description
    out["items"] = items
    return out


def quantity(description: str | None = None) -> Schema:
    out: Schema = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }
    if description:
        out = {"description": description, **out}
    return out


def int_or_string(description: str | None = None) -> Schema:
    out: Schema = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
    if description:
        out = {"description": description, **out}
    return out


def free_object(description: str) -> Schema:
    return {"type": "object", "description": description, "x-kubernetes-preserve-unknown-fields": True}
