"""Koordinator's CRDs built from the table in ``tests/koord_slo_facts.py``, and objects at its edges.

:func:`crd` gives the structural schema Koordinator's CRD of one version has (descriptions and defaults
aside); :func:`edge_objects` generates objects that version accepts at the table's edges: every field
present with integers at their limits (or their width's where Koordinator sets none), every enum value,
strings at their length limits or free text, each quantity syntax; then sparse objects holding only the
required fields, with and without their lists and maps filled.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tests.koord_slo_facts import TABLE, VERSIONS, Arr, Free, Leaf, Map, Node, Obj

# Kubernetes' resource.Quantity grammar: signed decimal, then a binary or decimal SI suffix or an exponent.
_NUMBER = r"([0-9]+(\.[0-9]*)?|\.[0-9]+)"
QUANTITY_RE = rf"^[+-]?{_NUMBER}([KMGTPE]i|[numkMGTPE]|[eE][+-]?{_NUMBER})?$"


def _present(node: Node, version: str) -> bool:
    return VERSIONS.index(node.since) <= VERSIONS.index(version)


def schema(node: Node, version: str) -> dict[str, Any]:
    """The structural schema Koordinator's CRD of ``version`` has for ``node`` (no descriptions)."""
    if isinstance(node, Obj):
        props = {k: schema(v, version) for k, v in node.fields.items() if _present(v, version)}
        out: dict[str, Any] = {"type": "object"}
        if props:
            out["properties"] = props
        if node.required:
            out["required"] = list(node.required)
        return out
    if isinstance(node, Arr):
        return {"type": "array", "items": schema(node.item, version)}
    if isinstance(node, Map):
        return {"type": "object", "additionalProperties": schema(node.value, version)}
    if isinstance(node, Free):
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if node.kind in ("quantity", "int-or-str"):
        out = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
        return out | ({"pattern": QUANTITY_RE} if node.kind == "quantity" else {})
    if node.kind == "int":
        out = {"type": "integer", "format": f"int{node.bits}"}
        limits = {"minimum": node.lo, "maximum": node.hi}
        return out | {k: v for k, v in limits.items() if v is not None}
    if node.kind == "bool":
        return {"type": "boolean"}
    if node.kind == "time":
        return {"type": "string", "format": "date-time"}
    out = {"type": "string"}
    if node.enum:
        out["enum"] = list(node.enum)
    if node.length:
        low, out["maxLength"] = node.length
        if low:
            out["minLength"] = low
    return out


def crd(plural: str, version: str) -> dict[str, Any]:
    """Koordinator's CRD ``plural`` (nodeslos, nodemetrics) at ``version``, as ``crdschema`` reads it."""
    parts = {part: schema(node, version) for part, node in TABLE[plural].items()}
    root = {
        "type": "object",
        "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, **parts},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.slo.koordinator.sh"},
        "spec": {"versions": [{"name": "v1alpha1", "storage": True, "schema": {"openAPIV3Schema": root}}]},
    }


QUANTITIES: tuple[Any, ...] = ("0", "1500m", "10Gi", 7, "-1", "1e3", ".5Ki", "2E-3", "+100M")
INT_OR_STRINGS: tuple[Any, ...] = (100, "50%", "100M")
TEXTS = ("", "free text: Koordinator sets no enum or syntax here", "cpuset")
KEYS = ("cpu", "memory", "nvidia.com/gpu", "kubernetes.io/batch-cpu")


def values(leaf: Leaf) -> tuple[Any, ...]:
    """The values of ``leaf`` Koordinator accepts that probe its edges."""
    if leaf.kind == "int":
        top = 1 << (leaf.bits - 1)
        lo = -top if leaf.lo is None else leaf.lo
        hi = top - 1 if leaf.hi is None else leaf.hi
        return (lo, hi, min(max(0, lo), hi))
    if leaf.kind == "bool":
        return (False, True)
    if leaf.kind == "time":
        return ("2026-01-01T00:00:00Z",)
    if leaf.kind == "quantity":
        return QUANTITIES
    if leaf.kind == "int-or-str":
        return INT_OR_STRINGS
    if leaf.enum:
        return leaf.enum
    texts = leaf.examples or TEXTS
    if leaf.length:
        low, high = leaf.length
        texts = (*texts, "a" * max(low, 1), "a" * high)
    return texts


def _leaves(node: Node) -> Iterator[Leaf]:
    if isinstance(node, Leaf):
        yield node
    elif isinstance(node, Obj):
        for child in node.fields.values():
            yield from _leaves(child)
    elif isinstance(node, Arr):
        yield from _leaves(node.item)
    elif isinstance(node, Map):
        yield from _leaves(node.value)


def _full(node: Node, version: str, i: int) -> Any:
    """Every field present; the ``i``-th of each leaf's edge values (cycling)."""
    if isinstance(node, Leaf):
        vals = values(node)
        return vals[i % len(vals)]
    if isinstance(node, Obj):
        return {k: _full(v, version, i) for k, v in node.fields.items() if _present(v, version)}
    if isinstance(node, Arr):
        return [_full(node.item, version, i), _full(node.item, version, i + 1)]
    if isinstance(node, Map):
        return {
            KEYS[i % len(KEYS)]: _full(node.value, version, i),
            "other": _full(node.value, version, i + 1),
        }
    return {"anyField": {"nested": [1, "two"]}}


def _sparse(node: Node, version: str, *, empty: bool) -> Any:
    """Only required scalars; structures present (one element each), or empty lists and maps if ``empty``."""
    if isinstance(node, Leaf):
        return values(node)[0]
    if isinstance(node, Obj):
        out = {}
        for k, v in node.fields.items():
            if _present(v, version) and (k in node.required or (not empty and not isinstance(v, Leaf))):
                out[k] = _sparse(v, version, empty=empty)
        return out
    if isinstance(node, Arr):
        return [] if empty else [_sparse(node.item, version, empty=empty)]
    if isinstance(node, Map):
        return {} if empty else {KEYS[0]: _sparse(node.value, version, empty=empty)}
    return {}


def edge_objects(node: Node, version: str) -> Iterator[tuple[str, Any]]:
    """Named objects Koordinator's ``version`` accepts for ``node``, together reaching every edge value."""
    rounds = max(len(values(leaf)) for leaf in _leaves(node)) if any(_leaves(node)) else 1
    for i in range(rounds):
        yield f"full-{i}", _full(node, version, i)
    yield "sparse", _sparse(node, version, empty=False)
    yield "empty", _sparse(node, version, empty=True)


def paths(node: Node, version: str, prefix: str) -> Iterator[str]:
    """Every field path under ``node`` (``[]`` for list items, ``*`` for map values)."""
    yield prefix
    if isinstance(node, Obj):
        for k, v in node.fields.items():
            if _present(v, version):
                yield from paths(v, version, f"{prefix}.{k}")
    elif isinstance(node, Arr):
        yield from paths(node.item, version, f"{prefix}[]")
    elif isinstance(node, Map):
        yield from paths(node.value, version, f"{prefix}.*")
