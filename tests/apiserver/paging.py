"""List paging: ``limit`` and ``continue`` as kube-apiserver answers them (``storage/etcd3`` ``GetList``).

A page holds at most ``limit`` items in namespace/name order; when more remain the list's metadata has a
``continue`` token naming the revision of the first page and the last key returned, so every later page is
read at that same revision (a consistent snapshot: objects created, changed or deleted meanwhile do not
show). A token whose revision has left the resource's history is 410 Expired, as a compacted etcd
revision is. ``remainingItemCount`` is given only for lists without selectors. ``resourceVersion`` with
``resourceVersionMatch=Exact`` reads at that revision; a version newer than the store is a 504.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from tests.apiserver import status

Obj = dict[str, Any]
_TOKEN_VERSION = "meta.k8s.io/v1"


def encode(rv: int, last: str) -> str:
    doc = {"v": _TOKEN_VERSION, "rv": rv, "start": last + "\x00"}
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode()


def decode(token: str) -> tuple[int, str]:
    try:
        doc = json.loads(base64.urlsafe_b64decode(token.encode()))
        if doc.get("v") != _TOKEN_VERSION or not isinstance(doc.get("rv"), int):
            raise ValueError(doc)
        return int(doc["rv"]), str(doc["start"])
    except (ValueError, TypeError, AttributeError, binascii.Error, json.JSONDecodeError):
        raise status.bad_request("continue key is not valid: not a token this server issued") from None


def key_of(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def after(obj: Obj, start: str) -> bool:
    return not start or key_of(obj) >= start


def starting_point(token: str | None, rv: str | None, match: str | None, current: int) -> tuple[int, str]:
    """The revision to read at and the first key to return."""
    if token:
        if rv not in (None, "", "0"):
            raise status.bad_request("specifying resource version is not allowed when using continue")
        return decode(token)
    if match not in (None, "", "Exact", "NotOlderThan"):
        raise status.bad_request(f"resourceVersionMatch: unsupported value {match!r}")
    if rv in (None, "", "0"):
        if match == "Exact":
            raise status.bad_request("resourceVersionMatch=Exact needs a resourceVersion other than 0")
        return current, ""
    try:
        asked = int(str(rv))
    except ValueError:
        raise status.bad_request(f"invalid resource version: {rv}") from None
    if asked > current:
        raise status.APIError(
            504, f"Too large resource version: {asked}, current: {current}", reason="Timeout"
        )
    return (asked if match == "Exact" else current), ""


def cut(items: list[Obj], limit: int | None, rv: int, *, counted: bool) -> tuple[list[Obj], str, int | None]:
    """The page, the continue token ("" on the last page) and the remaining count (if it is given)."""
    if not limit or limit <= 0 or len(items) <= limit:
        return items, "", None
    page = items[:limit]
    return page, encode(rv, key_of(page[-1])), (len(items) - limit) if counted else None


def expired() -> status.APIError:
    return status.APIError(
        410,
        "The provided continue parameter is too old to display a consistent list result. "
        "Start a new list without the continue parameter.",
        reason="Expired",
    )
