"""PATCH bodies by Content-Type: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge
(:mod:`tests.apiserver.smp`, built-in types only: on a custom resource it is a 415, as kube-apiserver's
``patchResource`` answers for types without Go struct tags).

Server-side apply (``application/apply-patch+yaml``: field managers, ``managedFields``, conflicts) is not
implemented. It is answered as a server without it answers, a 415 UnsupportedMediaType listing the patch
types it accepts; kubectl reports that as ``Server-side apply not available on the server`` (its
``isIncompatibleServerError``), and the OpenAPI documents do not offer the apply media type.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from tests.apiserver import smp
from tests.apiserver.resources import ResourceType
from tests.apiserver.status import APIError, bad_request

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def apply(
    target: dict[str, Any], body: Any, content_type: str, rt: ResourceType | None = None
) -> dict[str, Any]:
    """``target`` patched per ``content_type`` (parameters ignored); ``target`` itself is not changed."""
    media = content_type.split(";", maxsplit=1)[0].strip().lower()
    accepted = (
        (JSON_PATCH, MERGE) if rt is not None and rt.crd is not None else (JSON_PATCH, MERGE, STRATEGIC)
    )
    if media not in accepted:
        raise APIError(
            415,
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(accepted),
        )
    if media == STRATEGIC and rt is not None:
        return smp.apply(target, body, smp.schema_for_kind(rt.group, rt.version, rt.kind))
    if media in (MERGE, STRATEGIC):
        if not isinstance(body, dict):
            raise bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
        result = merge_patch(target, body)
        assert isinstance(result, dict)
        return result
    if media == JSON_PATCH:
        if not isinstance(body, list):
            raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
        try:
            patched = jsonpatch.apply_patch(target, body, in_place=False)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
            raise APIError(
                422, f"the server rejected our request due to an error in our request: {err}"
            ) from err
        if not isinstance(patched, dict):
            raise bad_request("a JSON patch must leave an object")
        return patched
    raise AssertionError(media)  # every accepted media type is handled above
