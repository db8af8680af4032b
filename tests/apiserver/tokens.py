"""TokenRequest: ``POST serviceaccounts/<name>/token`` (``kubectl create token``), as
``pkg/registry/core/serviceaccount/storage/token.go`` answers it.

The ServiceAccount must exist (404); ``spec.expirationSeconds`` defaults to an hour and must lie between
10 minutes and 2^32 seconds (422); ``audiences`` default to the server's. A ``boundObjectRef`` must name a
Pod, Secret or Node that exists (its deletion does not revoke the token here). The answer is the request
with ``status.token`` (an opaque token of :class:`tests.apiserver.auth.Auth` that stops working when it
expires or the account is deleted) and ``status.expirationTimestamp``; a dry run issues no token.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from tests.apiserver import status
from tests.apiserver.reviews import DEFAULT_AUDIENCES
from tests.apiserver.writes import now_rfc3339

if TYPE_CHECKING:
    from tests.apiserver.server import APIServer

Obj = dict[str, Any]
GROUP = "authentication.k8s.io"
DEFAULT_SECONDS = 3600
MIN_SECONDS, MAX_SECONDS = 600, 1 << 32
_BOUND_KINDS = {"Pod": "pods", "Secret": "secrets", "Node": "nodes"}


def request(api: APIServer, namespace: str, name: str, body: Any, *, dry_run: bool) -> Obj:
    if not isinstance(body, dict):
        raise status.bad_request("the body of a TokenRequest must be an object")
    api.store.get("serviceaccounts", name, namespace)  # 404 when the account does not exist
    out = copy.deepcopy(body)
    out["apiVersion"], out["kind"] = f"{GROUP}/v1", "TokenRequest"
    meta = out.setdefault("metadata", {})
    meta["name"], meta["namespace"] = name, namespace
    spec = out.setdefault("spec", {})
    if not isinstance(spec, dict):
        raise status.bad_request("spec of a TokenRequest must be an object")
    seconds = spec.setdefault("expirationSeconds", DEFAULT_SECONDS)
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise status.bad_request("spec.expirationSeconds must be an integer")
    if seconds < MIN_SECONDS:
        why = "may not specify a duration less than 10 minutes"
        raise status.invalid("TokenRequest", GROUP, name, [("spec.expirationSeconds", why)])
    if seconds > MAX_SECONDS:
        why = "may not specify a duration larger than 2^32 seconds"
        raise status.invalid("TokenRequest", GROUP, name, [("spec.expirationSeconds", why)])
    spec["audiences"] = spec.get("audiences") or list(DEFAULT_AUDIENCES)
    bound = spec.get("boundObjectRef")
    if isinstance(bound, dict):
        plural = _BOUND_KINDS.get(str(bound.get("kind")))
        if plural is None:
            why = f"{bound.get('kind')!r}: supported values: Node, Pod, Secret"
            raise status.invalid(
                "TokenRequest", GROUP, name, [("spec.boundObjectRef.kind", why, "NotSupported")]
            )
        api.store.get(plural, str(bound.get("name") or ""), None if plural == "nodes" else namespace)
    expires = api.store.clock() + seconds
    token = "" if dry_run else api.auth.token_for(namespace, name, expires=expires)
    out["status"] = {"token": token, "expirationTimestamp": now_rfc3339(lambda: expires)}
    return out
