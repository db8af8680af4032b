"""Strategic merge patch for the built-in types, written from apimachinery's
``pkg/util/strategicpatch/patch.go`` (``mergeMap``, ``mergeSlice``, ``normalizeElementOrder``).

Maps merge key by key and ``null`` deletes a key. A list merges only where the Go type declares
``patchStrategy:"merge"`` (:mod:`tests.apiserver.patchmeta` has those of the types served here, and the
structure comes from :mod:`tests.apiserver.typeschema`): a list of maps merges element by element on its
merge key (``containers`` by ``name``, ``conditions`` by ``type``, ``ownerReferences`` by ``uid``...), a
list of scalars (``finalizers``) is a union; every other list is replaced. Directives: ``$patch: replace``
and ``$patch: delete`` on a map or a list element, ``$deleteFromPrimitiveList/<field>``,
``$setElementOrder/<field>`` and ``$retainKeys``. Order follows upstream: the patch's elements keep their
order (new ones included), and elements only on the server are slotted in by their old positions, so a
new element comes *before* the server-only ones after it (a finalizer patch ``["b/y"]`` on ``["a/x"]``
gives ``["b/y", "a/x"]``). An element without its merge key is upstream's ErrNoMergeKey, answered as a
500.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Iterator, Mapping
from typing import Any, Union

from tests.apiserver import patchmeta, typeschema
from tests.apiserver.status import APIError, bad_request

PATCH = "$patch"
RETAIN_KEYS = "$retainKeys"
DELETE_FROM = "$deleteFromPrimitiveList/"
SET_ORDER = "$setElementOrder/"


@dataclasses.dataclass(frozen=True, slots=True)
class Merge:
    """A list with ``patchStrategy: merge``: ``key`` is its merge key (None: a list of scalars)."""

    key: str | None = None
    item: Schema = dataclasses.field(default_factory=dict)


Schema = Mapping[str, Union["Schema", Merge]]


class _ModelSchema(Mapping[str, Union["Schema", Merge]]):
    """The patch schema of one of the official client's models, read field by field as a patch reaches
    it: merging lists from :mod:`tests.apiserver.patchmeta`, nested structs as their own models."""

    def __init__(self, model: str) -> None:
        self._model = model

    def __getitem__(self, key: str) -> Schema | Merge:
        field = typeschema.model(self._model).fields.get(key)
        if field is None:
            raise KeyError(key)
        ref = field.type
        tagged = patchmeta.strategy(self._model, key)
        if tagged is not None and tagged.merge and ref.kind == "array" and ref.item is not None:
            return Merge(tagged.key, model_schema(ref.item.model) if ref.item.kind == "model" else {})
        if ref.kind == "model":
            return model_schema(ref.model)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(typeschema.model(self._model).fields)

    def __len__(self) -> int:
        return len(typeschema.model(self._model).fields)


@functools.cache
def model_schema(model: str) -> Schema:
    return _ModelSchema(model)


GENERIC: Schema = {"metadata": {"finalizers": Merge(), "ownerReferences": Merge("uid")}}


def schema_for_kind(group: str, version: str, kind: str) -> Schema:
    """The patch schema of a built-in kind (of its metadata alone when the client has no model)."""
    model = typeschema.model_class_for(group, version, kind)
    return model_schema(model) if model is not None else GENERIC


def schema_for(key: tuple[str, str]) -> Schema:
    """The patch schema of the built-in type stored under ``key`` (its storage version)."""
    from tests.apiserver.builtin import BUILTIN

    found = next((rt for rt in BUILTIN if rt.key == key), None)
    return GENERIC if found is None else schema_for_kind(found.group, found.version, found.kind)


def apply(target: dict[str, Any], patch: Any, schema: Schema) -> dict[str, Any]:
    if not isinstance(patch, dict):
        raise bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
    out = _merge_map(copy.deepcopy(target), copy.deepcopy(patch), schema)
    return out if out is not None else {}


def _strip(value: Any) -> Any:
    """A patch value taken whole: directives removed, nulls dropped (IgnoreUnmatchedNulls)."""
    if isinstance(value, dict):
        if value.get(PATCH) == "delete":
            return None
        return {
            k: _strip(v)
            for k, v in value.items()
            if v is not None
            and not k.startswith("$")
            and not (isinstance(v, dict) and v.get(PATCH) == "delete")
        }
    if isinstance(value, list):
        return [_strip(v) for v in value if not (isinstance(v, dict) and PATCH in v and len(v) == 1)]
    return value


def _merge_map(original: dict[str, Any], patch: dict[str, Any], schema: Schema) -> dict[str, Any] | None:
    directive = patch.pop(PATCH, None)
    if directive == "replace":
        return dict(_strip(patch))
    if directive == "delete":
        return None
    if directive not in (None, "merge"):
        raise bad_request(f"Unknown patch type: {directive} in map: {patch}")
    retain = patch.pop(RETAIN_KEYS, None)
    orders = {k[len(SET_ORDER) :]: patch.pop(k) for k in [k for k in patch if k.startswith(SET_ORDER)]}
    for key in [k for k in patch if k.startswith(DELETE_FROM)]:
        field, doomed = key[len(DELETE_FROM) :], patch.pop(key)
        if not isinstance(doomed, list):
            raise bad_request("invalid patch: $deleteFromPrimitiveList must be a list")
        if isinstance(original.get(field), list):
            original[field] = [v for v in original[field] if v not in doomed]
    for key, value in patch.items():
        sub = schema.get(key)
        if value is None:
            original.pop(key, None)
        elif key not in original:
            stripped = _strip(value)
            if stripped is not None:
                original[key] = stripped
        elif isinstance(value, dict) and isinstance(original[key], dict):
            merged = _merge_map(original[key], value, sub if isinstance(sub, Mapping) else {})
            if merged is None:
                del original[key]
            else:
                original[key] = merged
        elif isinstance(value, list) and isinstance(original[key], list) and isinstance(sub, Merge):
            original[key] = _merge_list(original[key], value, sub, orders.pop(key, None))
        else:
            original[key] = _strip(value)
    for field, order in orders.items():  # an order given without the list itself
        sub = schema.get(field)
        if isinstance(original.get(field), list) and isinstance(sub, Merge):
            original[field] = _merge_list(original[field], [], sub, order)
    if isinstance(retain, list):
        for key in [k for k in original if k not in retain]:
            del original[key]
    return original


def _ident(item: Any, key: str | None) -> Any:
    return item.get(key) if key is not None and isinstance(item, dict) else item


def _merge_list(original: list[Any], patch: list[Any], meta: Merge, order: list[Any] | None) -> list[Any]:
    key = meta.key
    if key is None:
        merged = (
            list(dict.fromkeys([*original, *patch]).keys())
            if _hashable(original, patch)
            else original + patch
        )
        named = order if order is not None else patch
    else:
        plain = []
        for elem in patch:
            if not isinstance(elem, dict):
                raise bad_request(f"invalid patch: list element {elem!r} of a merging list is not a map")
            directive = elem.get(PATCH)
            if directive == "delete":
                if key not in elem:
                    raise _no_merge_key(elem, key)
                original = [o for o in original if _ident(o, key) != elem[key]]
            elif directive == "replace":
                return [_strip(e) for e in patch if not (isinstance(e, dict) and PATCH in e)]
            elif directive is not None:
                raise bad_request(f"Unknown patch type: {directive} in list element: {elem}")
            else:
                plain.append(elem)
        merged = list(original)
        for elem in plain:
            if key not in elem:
                raise _no_merge_key(elem, key)
            at = next((i for i, o in enumerate(merged) if _ident(o, key) == elem[key]), None)
            if at is None:
                merged.append(_strip(elem))
            else:
                result = _merge_map(merged[at], elem, meta.item)
                merged[at] = result if result is not None else merged[at]
        named = order if order is not None else plain
    wanted = [_ident(n, key) for n in named]
    patch_items = [m for m in merged if _ident(m, key) in wanted]
    patch_items.sort(key=lambda m: wanted.index(_ident(m, key)))
    server_only = [m for m in merged if _ident(m, key) not in wanted]
    return _interleave(server_only, patch_items, [_ident(o, key) for o in original], key)


def _interleave(
    server_only: list[Any], patch_items: list[Any], server_order: list[Any], key: str | None
) -> list[Any]:
    """``mergeSortedSlice``: a server-only element goes first only when both it and the next patch
    element were on the server and it came first there."""
    out, i, j = [], 0, 0
    while i < len(server_only) or j < len(patch_items):
        if j >= len(patch_items):
            out.append(server_only[i])
            i += 1
            continue
        if i >= len(server_only):
            out.append(patch_items[j])
            j += 1
            continue
        left, right = _ident(server_only[i], key), _ident(patch_items[j], key)
        if (
            left in server_order
            and right in server_order
            and server_order.index(left) < server_order.index(right)
        ):
            out.append(server_only[i])
            i += 1
        else:
            out.append(patch_items[j])
            j += 1
    return out


def _hashable(*lists: list[Any]) -> bool:
    return all(isinstance(v, (str, int, float, bool)) for lst in lists for v in lst)


def _no_merge_key(elem: Any, key: str) -> APIError:
    return APIError(500, f"map: {elem} does not contain declared merge key: {key}", reason="InternalError")
