"""What a request is about, read from its URL the way kube-apiserver's ``RequestInfoFactory`` does
(``apiserver/pkg/endpoints/request/requestinfo.go``): routing and RBAC both use it.

A resource request is ``/api/v1/...`` or ``/apis/<group>/<version>/...`` followed by ``[namespaces/<ns>/]
<resource>[/<name>[/<subresource>]]`` (``/namespaces/<name>[/status|/finalize]`` is the namespace itself),
optionally behind the deprecated ``watch/`` prefix. The verb is the RBAC one: get/list/watch for GET
(``?watch=true`` or the prefix makes a watch), create, update, patch, delete, and deletecollection for a
DELETE without a name. Anything else is a non-resource request whose verb is the lowercase method.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclasses.dataclass(frozen=True, slots=True)
class RequestInfo:
    path: str
    verb: str
    is_resource: bool = False
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    extra_parts: int = 0  # path segments beyond resource/name/subresource (not served here)


def _truthy(value: str | None) -> bool:
    return value in ("true", "1", "True")


def parse(method: str, path: str, query: Mapping[str, str]) -> RequestInfo:
    parts = [p for p in path.split("/") if p]
    method = method.upper()
    plain = RequestInfo(path, method.lower())
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return plain
    if not rest:
        return plain  # discovery of one group version
    watch_prefix = rest[0] == "watch"
    if watch_prefix:
        rest = rest[1:]
    namespace = ""
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    if not rest:
        return plain
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if method == "GET" or method == "HEAD":
        watching = watch_prefix or _truthy(query.get("watch"))
        verb = "watch" if watching else ("get" if name else "list")
    elif method == "DELETE" and not name:
        verb = "deletecollection"
    else:
        verb = _METHOD_VERBS.get(method, method.lower())
    return RequestInfo(
        path,
        verb,
        True,
        group,
        version,
        resource,
        sub,
        namespace,
        name,
        max(len(rest) - 3, 0),
    )
